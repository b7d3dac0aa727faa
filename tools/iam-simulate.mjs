// Evaluates AWS requests against IAM policies with @cloud-copilot/iam-simulate (a maintained
// evaluator of identity and resource policies, conditions included). tests/iam.py calls it with a
// batch: stdin {"requests": [{id, principal, action, resource, accountId, context,
// identityPolicies: [{name, policy}], resourcePolicy?}]}, stdout [{id, result, errors?}].
// With --serve it stays up (one process per test worker: node's start-up and the evaluator's
// action data cost ~0.3 s of CPU each time): one batch per stdin line, one answer per stdout line
// ({"error": message} when a batch could not be evaluated).
import { createInterface } from 'node:readline';
import { runSimulation } from '@cloud-copilot/iam-simulate';

async function evaluate(requests) {
  const out = [];
  for (const r of requests) {
    const simulation = {
      identityPolicies: r.identityPolicies || [],
      serviceControlPolicies: [],
      resourceControlPolicies: [],
      resourcePolicy: r.resourcePolicy,
      request: {
        action: r.action,
        principal: r.principal,
        resource: { resource: r.resource, accountId: r.accountId },
        contextVariables: r.context || {},
      },
    };
    const res = await runSimulation(simulation, {});
    if (res.resultType === 'error') {
      out.push({ id: r.id, result: 'Error', errors: res.errors });
    } else {
      out.push({ id: r.id, result: res.overallResult });
    }
  }
  return out;
}

if (process.argv.includes('--serve')) {
  for await (const line of createInterface({ input: process.stdin, crlfDelay: Infinity })) {
    if (!line.trim()) continue;
    let answer;
    try {
      answer = await evaluate(JSON.parse(line).requests);
    } catch (e) {
      answer = { error: String(e && e.stack || e) };
    }
    process.stdout.write(JSON.stringify(answer) + '\n');
  }
} else {
  const chunks = [];
  for await (const c of process.stdin) chunks.push(c);
  process.stdout.write(JSON.stringify(await evaluate(JSON.parse(Buffer.concat(chunks).toString('utf8')).requests)));
}
