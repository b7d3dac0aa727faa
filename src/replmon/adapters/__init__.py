"""adapters: the outside world behind core/ports.py - S3, DynamoDB, SQS, CloudWatch, EMF - and
clients.py, the one place AWS clients are built under one retry and timeout policy.
May import: core (and boto3, botocore, Powertools); imported by wiring.py and the edges (cli, local, lab), never by the domain or entry/."""
