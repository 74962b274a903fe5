/**
 * This project's App Attest verifier against `node-app-attest` (npm), same process, same real
 * captures (test/fixtures/apple), each verified at its own `verifyAt` (the leaves have expired;
 * the peer never checks validity dates, ours takes the instant as its clock).
 * `npm run bench:peer`. Both must accept every input before anything is timed.
 * Both hash the same client data: ours gets it as the nonce (clientDataHash = SHA-256(nonce)),
 * the peer as its challenge / payload. Key stores answer at once (ours), the peer has none: it
 * takes the PEM key and the previous counter as arguments.
 */
import { createPublicKey } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import {
  verifyAssertion as peerAssertion,
  verifyAttestation as peerAttestation,
} from 'node-app-attest';
import { createAppleVerifier } from '../src/core/apple/appleVerifier.js';
import { defaultAppleRoots } from '../src/core/apple/trustRoots.js';
import { createMemoryAllowlist } from '../src/core/memoryStores.js';
import { TraceRecorder } from '../src/core/trace.js';
import type { AppleKeyRecord, AppleKeyStore } from '../src/core/ports.js';

interface Capture {
  id: string;
  appId: string;
  teamId: string;
  bundleId: string;
  keyId: string;
  environment?: string;
  attestation?: string;
  clientDataHash?: string;
  attestationClientData?: { base64?: string };
  verifyAt?: string;
  assertions?: {
    assertion: string;
    clientData?: { utf8?: string };
    expectedCounter: number;
    publicKeyPem: string;
  }[];
}

const DIR = new URL('../test/fixtures/apple/', import.meta.url);
const captures = readdirSync(DIR)
  .filter((f) => f.endsWith('.json'))
  .map((f) => JSON.parse(readFileSync(new URL(f, DIR), 'utf8')) as Capture);
const b64 = (s: string) => Buffer.from(s, 'base64');
const roots = defaultAppleRoots();
const allowlist = createMemoryAllowlist({
  apple: captures.map((c) => ({ appId: c.appId, env: 'any' as const })),
});
const unknownKey: AppleKeyStore = {
  find: async () => null,
  register: async () => true,
  raiseCounter: async () => true,
};

interface Case {
  name: string;
  ours: () => Promise<unknown>;
  peer: () => unknown;
}

const attestations: Case[] = [];
const assertions: Case[] = [];
const registering = createAppleVerifier({ roots, allowlist, keys: unknownKey });
for (const c of captures) {
  if (c.attestation && c.attestationClientData?.base64 && c.verifyAt) {
    const challenge = b64(c.attestationClientData.base64);
    const evidence = new Map<string, unknown>([
      ['keyId', b64(c.keyId)],
      ['attestation', b64(c.attestation)],
    ]);
    const now = new Date(c.verifyAt);
    attestations.push({
      name: c.id,
      ours: () =>
        registering.verify(evidence, { nonce: challenge, now, trace: new TraceRecorder() }),
      peer: () =>
        peerAttestation({
          attestation: b64(c.attestation!),
          challenge,
          keyId: c.keyId,
          bundleIdentifier: c.bundleId,
          teamIdentifier: c.teamId,
          allowDevelopmentEnvironment: true,
        }),
    });
  }
  for (const [i, a] of (c.assertions ?? []).entries()) {
    if (a.clientData?.utf8 === undefined) continue;
    const payload = Buffer.from(a.clientData.utf8, 'utf8');
    const record: AppleKeyRecord = {
      keyId: b64(c.keyId),
      publicKey: new Uint8Array(
        createPublicKey(a.publicKeyPem).export({ type: 'spki', format: 'der' }),
      ),
      appId: c.appId,
      environment: c.environment === 'production' ? 'Production' : 'Development',
      counter: a.expectedCounter - 1,
    };
    // the stored counter stays below the assertion's, so every iteration is accepted
    const keys: AppleKeyStore = {
      find: async () => record,
      register: async () => false,
      raiseCounter: async () => true,
    };
    const verifier = createAppleVerifier({ roots, allowlist, keys });
    const evidence = new Map<string, unknown>([
      ['keyId', b64(c.keyId)],
      ['assertion', b64(a.assertion)],
    ]);
    assertions.push({
      name: `${c.id}#${i}`,
      ours: () =>
        verifier.verify(evidence, { nonce: payload, now: new Date(), trace: new TraceRecorder() }),
      peer: () =>
        peerAssertion({
          assertion: b64(a.assertion),
          payload,
          publicKey: a.publicKeyPem,
          bundleIdentifier: c.bundleId,
          teamIdentifier: c.teamId,
          signCount: a.expectedCounter - 1,
        }),
    });
  }
}

/** the inputs both accept (a capture one side rejects is listed, not timed) */
async function accepted(cases: Case[]) {
  const both: Case[] = [];
  for (const k of cases) {
    const ours = await k.ours().then(
      () => true,
      (e: unknown) => `rejects (${(e as Error).message ?? e})`,
    );
    let peer: true | string = true;
    try {
      k.peer();
    } catch (e) {
      peer = `rejects (${(e as Error).message})`;
    }
    if (ours === true && peer === true) both.push(k);
    else
      console.log(
        `  not timed: ${k.name}: ours ${ours === true ? 'accepts' : ours}, peer ${peer === true ? 'accepts' : peer}`,
      );
  }
  return both;
}

/** ms per operation over all cases, median of `rounds` rounds of `perRound` passes */
async function time(run: () => Promise<void>, rounds: number, perRound: number): Promise<number> {
  const samples: number[] = [];
  for (let r = 0; r < rounds; r++) {
    const started = performance.now();
    for (let i = 0; i < perRound; i++) await run();
    samples.push((performance.now() - started) / perRound);
  }
  samples.sort((a, b) => a - b);
  return samples[Math.floor(samples.length / 2)]!;
}

async function compare(label: string, cases: Case[], perRound: number) {
  const both = await accepted(cases);
  const ours = async () => {
    for (const k of both) await k.ours();
  };
  const peer = async () => {
    for (const k of both) k.peer();
  };
  // warm-up: JIT, and ours fills its intermediate and key caches as a running service does
  await time(ours, 1, perRound);
  await time(peer, 1, perRound);
  // alternate the sides, so load from elsewhere on the machine weighs on both alike
  let oursMs = 0;
  let peerMs = 0;
  for (let i = 0; i < 3; i++) {
    oursMs += await time(ours, 5, perRound);
    peerMs += await time(peer, 5, perRound);
  }
  oursMs /= 3 * both.length;
  peerMs /= 3 * both.length;
  console.log(
    `${label}: ${both.length} captures; attest ${(oursMs * 1000).toFixed(0)} µs/op, node-app-attest ${(peerMs * 1000).toFixed(0)} µs/op -> attest is ${(peerMs / oursMs).toFixed(2)}x the peer's speed`,
  );
  return {
    label,
    captures: both.length,
    oursUs: oursMs * 1000,
    peerUs: peerMs * 1000,
    speedup: peerMs / oursMs,
  };
}

const load = readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');
console.log(`node ${process.version}, load ${load}`);
const att = await compare('attestation (registration)', attestations, 10);
const asr = await compare('assertion', assertions, 100);
console.log(
  `targets: attestation >= 1x -> ${att.speedup >= 1 ? 'met' : 'missed'}; assertion >= 2x -> ${asr.speedup >= 2 ? 'met' : 'missed'}`,
);
