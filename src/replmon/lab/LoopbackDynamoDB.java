// DynamoDB Local bound to 127.0.0.1 only. Its own ServerRunner listens on every interface and
// checks no credentials, so anyone who can reach the machine could read or change the lab's
// store. This launcher builds the server the same way (same command-line flags), moves each
// Jetty connector to the loopback address before it binds, then starts it.
// scripts/lab-deps.sh compiles it against the DynamoDB Local jars it fetches.
import com.amazonaws.services.dynamodbv2.local.main.ServerRunner;
import com.amazonaws.services.dynamodbv2.local.server.DynamoDBProxyServer;
import java.lang.reflect.Field;
import org.eclipse.jetty.server.Connector;
import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.server.ServerConnector;

public final class LoopbackDynamoDB {
    private LoopbackDynamoDB() {}

    public static void main(String[] args) throws Exception {
        DynamoDBProxyServer proxy = ServerRunner.createServerFromCommandLineArgs(args);
        Field field = DynamoDBProxyServer.class.getDeclaredField("server");
        field.setAccessible(true);
        Server server = (Server) field.get(proxy);
        for (Connector connector : server.getConnectors()) {
            if (!(connector instanceof ServerConnector)) {
                throw new IllegalStateException("unexpected connector " + connector + "; cannot bind it to loopback");
            }
            ((ServerConnector) connector).setHost("127.0.0.1");
        }
        proxy.start();
        System.out.println("LoopbackDynamoDB listening on 127.0.0.1");
        proxy.join();
    }
}
