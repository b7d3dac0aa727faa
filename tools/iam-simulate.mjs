// Evaluates AWS requests against IAM policies with @cloud-copilot/iam-simulate (a maintained
// evaluator of identity and resource policies, conditions included). tests/iam.py calls it once
// per batch: stdin {"requests": [{id, principal, action, resource, accountId, context,
// identityPolicies: [{name, policy}], resourcePolicy?}]}, stdout [{id, result, errors?}].
import { runSimulation } from '@cloud-copilot/iam-simulate';

const chunks = [];
for await (const c of process.stdin) chunks.push(c);
const { requests } = JSON.parse(Buffer.concat(chunks).toString('utf8'));
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
process.stdout.write(JSON.stringify(out));
