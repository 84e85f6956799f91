// `node scripts/bench-inspector.mjs [--mib=50] [--runs=4]`: how fast the StateInspector (the
// compiled dist/src/state/state-inspector.js) reads a large pretty-printed state fed in 64 KiB
// chunks, like a socket delivers it, in MiB/s per run, and JSON.parse of the same body beside it.
//
//  The state looks like a real provider's: `aws_iam_role` resources with nested attributes, a
//  policy document as an escaped string, non-ASCII text, numbers, booleans and nulls. It exits
//  non-zero if the inspector does not read the body as the serial-42 Terraform state it is.
import { buildIfStale, dist, numberArg } from './lib/bench-common.mjs';

buildIfStale();

const { StateInspector } = dist('state/state-inspector.js');

const MIB = numberArg('mib', 50);
const RUNS = numberArg('runs', 4);
const CHUNK = 65536;

/** A pretty-printed state of about `mib` MiB that looks like a real provider's. */
function bigState(mib) {
  const policy = JSON.stringify({
    Version: '2012-10-17',
    Statement: [{ Effect: 'Allow', Action: ['s3:GetObject'], Resource: 'arn:aws:s3:::b/*' }],
  });
  const resources = [];
  const state = {
    version: 4,
    terraform_version: '1.11.4',
    serial: 42,
    lineage: 'e539db4c-a061-564c-e3ad-4b3d4a924289',
    outputs: { vpc_id: { value: 'vpc-0abc', type: 'string' } },
    resources,
    check_results: null,
  };
  const make = (i) => ({
    mode: 'managed',
    type: 'aws_iam_role',
    name: `role_${i}`,
    provider: 'provider["registry.terraform.io/hashicorp/aws"]',
    instances: [
      {
        index_key: `k${i}`,
        schema_version: 0,
        attributes: {
          arn: `arn:aws:iam::123456789012:role/service-role-${i}`,
          assume_role_policy: policy,
          create_date: '2026-11-30T04:45:00Z',
          description: `Rôle ${i} — managed by Terraform`,
          force_detach_policies: false,
          id: `service-role-${i}`,
          max_session_duration: 3600,
          tags: { Team: 'platform', Env: i % 2 === 0 ? 'prod' : 'dev', Cost: 12.5 },
          managed_policy_arns: ['arn:aws:iam::aws:policy/ReadOnlyAccess'],
          permissions_boundary: null,
        },
        sensitive_attributes: [],
        dependencies: ['aws_iam_policy.base', `aws_s3_bucket.b${i % 7}`],
      },
    ],
  });
  const target = mib * 1024 * 1024;
  const sample = JSON.stringify(make(0), null, 2).length + 8;
  const count = Math.ceil(target / sample);
  for (let i = 0; i < count; i++) resources.push(make(i));
  return Buffer.from(`${JSON.stringify(state, null, 2)}\n`);
}

const body = bigState(MIB);
const mib = body.length / (1024 * 1024);
const rates = [];
for (let run = 0; run < RUNS; run++) {
  const started = process.hrtime.bigint();
  const inspector = new StateInspector();
  for (let offset = 0; offset < body.length; offset += CHUNK) {
    inspector.write(body.subarray(offset, offset + CHUNK));
  }
  const read = inspector.end();
  rates.push(mib / (Number(process.hrtime.bigint() - started) / 1e9));
  if (read.kind !== 'terraform' || read.serial !== 42) {
    console.error(`bench-inspector: read the state as ${read.kind}, serial ${read.serial}`);
    process.exit(1);
  }
}
const started = process.hrtime.bigint();
JSON.parse(body.toString('utf8'));
const parseRate = mib / (Number(process.hrtime.bigint() - started) / 1e9);
console.log(
  `StateInspector: ${mib.toFixed(1)} MiB state, MiB/s per run: ${rates
    .map((r) => r.toFixed(0))
    .join(', ')} (best ${Math.max(...rates).toFixed(0)}); ` +
    `JSON.parse of the same body: ${parseRate.toFixed(0)} MiB/s`,
);
