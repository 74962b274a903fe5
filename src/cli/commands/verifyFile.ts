import { Command } from 'commander';
import { findHints } from '../../core/explain.js';
import { createMemoryAllowlist, createMemoryDeviceVelocity } from '../../core/memoryStores.js';
import { looksLikeJws } from '../../core/resultToken.js';
import type { AllowlistReader, DeviceVelocityStore, KeyMode } from '../../core/ports.js';
import type { VerifyOutcome } from '../../core/outcome.js';
import { buildVerifiers } from '../../core/verifiers.js';
import {
  DEVICE_NONCE_BYTES,
  finalNonce,
  verifyToken,
  type VerifyInput,
} from '../../core/verify.js';
import { TOKEN_NONCE_MAX, TOKEN_NONCE_MIN } from '../../core/envelope.js';
import { config, withAdmin } from '../context.js';
import { CliError, EXIT, usageError } from '../errors.js';
import { parseAppList } from '../appList.js';
import { isoInstant } from '../isoInstant.js';
import { KINDS } from '../kinds/registry.js';
import type {
  VerifierParts,
  VerifierPartsOf,
  VerifyFileFlags,
  VerifyFileOptions,
  VerifyFileSetup,
} from '../kinds/verifyFileKind.js';
import { printJson } from '../output.js';
import { verifyResultTokenFile } from '../resultTokenReport.js';
import { bytesFlag } from '../tokenOutput.js';
import { parseTokenInput, readBounded } from '../tokenInput.js';
import { verifyReport } from '../verifyReport.js';
import { captureComparison, readCaptureForReplay } from '../captureReplay.js';

interface Options extends VerifyFileFlags {
  nonce?: string;
  serverNonce?: string;
  deviceNonce?: string;
  jwks?: string;
  issuer?: string;
  audience?: string;
  keyApps?: string;
  capture?: string;
}

/** verify-file's own flags; each kind adds its own between them (see VerifyFileOptions.at). */
const GENERIC_OPTIONS: VerifyFileOptions[] = [
  {
    at: 10,
    add: (command) =>
      command
        .option('--nonce <b64>', 'the final nonce (sessionless expectedNonce)')
        .option('--server-nonce <b64>', 'the serverNonce from init (session approach)')
        .option('--device-nonce <b64>', 'with --server-nonce: the deviceNonce sent to verify')
        .option('--at <iso-time>', 'verify as of this instant (certificate validity, freshness)')
        .option(
          '--capture <id>',
          "replay a token serve kept (attest captures list) with the server's own nonce, instant and key mode, and compare verdicts",
        ),
  },
  {
    at: 60,
    add: (command) =>
      command
        .option(
          '--dev-roots',
          "verify as a test API key would: also trust the database's development CA and test-only Play pairs",
        )
        .option(
          '--jwks <file>',
          "a result token: check it against this key set (what /.well-known/jwks.json serves) instead of the database's keys",
        )
        .option(
          '--issuer <url>',
          'a result token: the issuer it must name (default ATTEST_ISSUER when set)',
        )
        .option('--audience <id>', 'a result token: the API key id it must be made for')
        .option(
          '--key-apps <ids>',
          'verify as an API key scoped to these app IDs and packages would (keys create --apps): another app is app_not_in_key_scope',
        ),
  },
  {
    at: 90,
    add: (command) => command.option('--json', 'print a JSON document (documented in the README)'),
  },
];

export function verifyFileCommand(): Command {
  const command = new Command('verify-file')
    .description(
      'check a token offline, step by step, and explain why it is rejected (changes no state)',
    )
    .argument(
      '[token]',
      'file with the token as raw CBOR, base64 text, or a saved verify request body (JSON); - for stdin',
    );
  const options = [...GENERIC_OPTIONS, ...KINDS.flatMap((k) => k.verifyFile.options)];
  // a stable sort: a kind's options keep their order
  for (const o of options.sort((a, b) => a.at - b.at)) o.add(command);
  return command
    .addHelpText(
      'after',
      `
Uses the allowlist and registered keys of the configured database, read-only, unless --app-id,
--package or --apple-key is given. Without a nonce flag the nonce is not checked; a saved verify
request body supplies its expectedNonce. Verifies as a live API key does unless --dev-roots.
Standard-request Play Integrity tokens can only be decoded by Google: they are verified with
--online only.

Examples:
  $ attest verify-file token.b64 --server-nonce q4T...= --device-nonce AAEC
  $ attest verify-file capture.cbor --at 2021-01-23T12:13:33Z --app-id 6MURL8TA57.de.example.app \\
      --client-data-hash SGVsbG8=
  $ attest verify-file play.cbor --nonce ... --package com.example.app \\
      --decryption-key-file dec.key --verification-key-file ver.key --json
  $ attest verify-file standard.cbor --nonce ... --online
  $ attest verify-file result.jwt --jwks jwks.json --audience 0h3k5x9q2m7c1b4n --at 2026-01-01T10:00:00Z
  $ attest verify-file --receipt receipt.der --at 2020-11-21T22:13:10Z --app-id 6MURL8TA57.de.example.app
  $ attest verify-file android.cbor --nonce ... --package com.example.app --min-security-level strongbox`,
    )
    .action(async (tokenPath: string | undefined, opts: Options, command: Command) => {
      const offlineFlags = KINDS.some((k) => k.verifyFile.offline(opts));
      const capture =
        opts.capture === undefined
          ? undefined
          : await readCaptureForReplay(opts.capture, tokenPath, { ...opts }, command, offlineFlags);
      for (const kind of KINDS) {
        if (capture) break;
        const alone = kind.verifyFile.alone?.(tokenPath, opts);
        if (alone) {
          process.exitCode = (await alone) ? EXIT.ok : EXIT.negative;
          return;
        }
      }
      if (tokenPath === undefined && !capture)
        throw usageError('give the TOKEN file to check (or --receipt FILE for a receipt alone)');
      for (const kind of KINDS) kind.verifyFile.check?.(opts);
      let token: Uint8Array = new Uint8Array();
      let bodyNonce: string | undefined;
      let raw: Buffer;
      let jws: string | undefined;
      try {
        if (capture) raw = Buffer.from(capture.token);
        else raw = await readBounded(tokenPath!);
        const text = raw.toString('latin1').trim();
        if (looksLikeJws(text)) jws = text;
        else {
          const stray = (['jwks', 'issuer', 'audience'] as const).find(
            (k) => opts[k] !== undefined,
          );
          if (stray)
            throw usageError(
              `--${stray} is for result tokens (a JWT), and ${tokenPath} holds an attestation token`,
            );
          ({ token, bodyNonce } = parseTokenInput(raw, tokenPath ?? `capture ${opts.capture}`));
        }
      } catch (err) {
        // scripts reading --json get a document for an unreadable input too (exit 2 as well)
        if (opts.json === true && err instanceof CliError)
          printJson({ valid: false, error: 'input_unreadable', detail: err.message });
        throw err;
      }
      if (jws !== undefined) {
        process.exitCode = (await resultToken(jws, opts)) ? EXIT.ok : EXIT.negative;
        return;
      }
      if (bodyNonce !== undefined && opts.nonce === undefined && opts.serverNonce === undefined)
        opts.nonce = bodyNonce;
      const { expectedNonce, serverNonce, deviceNonce } = capture
        ? { expectedNonce: capture.nonce, serverNonce: undefined, deviceNonce: undefined }
        : nonces(opts);
      const at = capture?.verifiedAt ?? (opts.at === undefined ? new Date() : instant(opts.at));
      const input: VerifyInput = {
        token,
        expectedNonce,
        ...(opts.keyApps !== undefined
          ? { appScope: parseAppList(opts.keyApps, '--key-apps') }
          : {}),
        ...(capture?.appScope ? { appScope: capture.appScope } : {}),
      };
      for (const kind of KINDS) Object.assign(input, kind.verifyFile.input?.(opts));
      const offline = KINDS.some((k) => k.verifyFile.offline(opts));
      if (offline && opts.devRoots)
        throw usageError(
          '--dev-roots reads the development CA from the database: leave out --app-id, --package and --apple-key',
        );
      const mode: KeyMode = capture?.mode ?? (opts.devRoots ? 'test' : 'live');
      for (const kind of KINDS) kind.verifyFile.checkToken?.(token, opts);
      const cfg = config();
      const setups: VerifyFileSetup[] = [];
      for (const kind of KINDS) setups.push(await kind.verifyFile.prepare(opts, cfg));

      const explain = async (
        allowlist: AllowlistReader,
        parts: VerifierPartsOf[],
        devRoot: Uint8Array | null,
      ) => {
        const runAs =
          (m: KeyMode) =>
          (i: VerifyInput, o: { allowlist?: AllowlistReader; at?: Date } = {}) =>
            verifyToken(i, {
              now: () => o.at ?? at,
              verifiers: buildVerifiers({
                allowlist: o.allowlist ?? allowlist,
                mode: m,
                ...(Object.assign({}, ...parts.map((p) => p(m, devRoot))) as VerifierParts),
              } as Parameters<typeof buildVerifiers>[0]),
            });
        const run = runAs(mode);
        try {
          const outcome = await run(input);
          const hints = outcome.ok
            ? []
            : await findHints(outcome, {
                input,
                at,
                allowlist,
                run,
                ...(serverNonce ? { serverNonce } : {}),
                ...(deviceNonce ? { deviceNonce } : {}),
              });
          if (
            !outcome.ok &&
            mode === 'live' &&
            !offline &&
            TEST_TRUST_REASONS.has(outcome.reason)
          ) {
            // a token minted by `attest dev mint` (or a key a test key registered) passes only for test keys
            const asTest = await runAs('test')(input);
            if (asTest.ok || failedAt(asTest) > failedAt(outcome)) {
              hints.push({
                code: 'test_keys_only',
                message:
                  'this token gets further as a test API key would verify it (development CA, test-only Play pairs, keys test keys registered): a live key rejects it; run again with --dev-roots to see the rest',
              });
            }
          }
          return { outcome, hints, devRoot: devRoot !== null };
        } catch (err) {
          for (const setup of setups) {
            const fault = setup.fault?.(err);
            if (fault) throw fault;
          }
          throw err;
        }
      };

      const result = offline
        ? await explain(
            createMemoryAllowlist(
              Object.assign({}, ...setups.map((s) => s.offlineEntries?.(token) ?? {})),
            ),
            [
              ...setups.map((s) => s.offline(token)),
              // no database: this one verify is the device's only one
              () => ({ velocity: createMemoryDeviceVelocity({ readOnly: true }) }),
            ],
            null,
          )
        : await withAdmin(
            async (admin) => {
              // one snapshot for the whole run, so the re-tries see the same allowlist
              const { devRoot, ...entries } = await admin.run('verifyFile.snapshot', {});
              if (opts.devRoots && !devRoot)
                process.stderr.write(
                  'attest: note: this deployment has no development CA ("attest dev init"); --dev-roots adds only test-only Play pairs\n',
                );
              const parts = [];
              for (const setup of setups) parts.push(await setup.database(admin));
              // the device's count as the database holds it (live keys' count), plus this verify,
              // which is not recorded; a full window would refuse it
              const velocity: DeviceVelocityStore = {
                count: async ({ max, mode: _mode, ...v }) => {
                  const held = await admin.run('devices.peek', v);
                  return max !== undefined && held >= max ? null : held + 1;
                },
              };
              parts.push(() => ({ velocity }));
              return explain(createMemoryAllowlist(entries), parts, devRoot);
            },
            { establish: false },
          );

      const roots = setups.map((s) => s.trustRoots?.()).find((r) => r !== undefined) ?? '';
      let receipt = null;
      for (const setup of setups)
        receipt ??= (await setup.receipt?.(token, at, result.outcome)) ?? null;
      verifyReport(result.outcome, result.hints, {
        receipt,
        at,
        nonceChecked: expectedNonce !== null,
        // said only where the token's kind reads --challenge
        challengeGiven:
          input.challenge !== undefined &&
          KINDS.some(
            (k) => k.service === result.outcome.facts.service && k.verifyFile.readsChallenge,
          ),
        json: opts.json === true,
        offline,
        roots: mode === 'test' && result.devRoot ? `${roots}+development` : roots,
        mode,
        ...(capture ? { capture: captureComparison(capture, result.outcome) } : {}),
      });
      process.exitCode = result.outcome.ok ? EXIT.ok : EXIT.negative;
    });
}

/** verify-file for a result token; the flags of attestation tokens do not apply to it. */
async function resultToken(text: string, opts: Options): Promise<boolean> {
  const stray = [...KINDS.flatMap((k) => k.verifyFile.attestationOnly), 'devRoots'].find(
    (name) => opts[name] !== undefined && opts[name] !== false && !isEmptyList(opts[name]),
  );
  if (stray)
    throw usageError(
      `--${stray.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)} is for attestation tokens; this is a result token (a JWT): check it with --jwks FILE or against the database's keys`,
    );
  const { expectedNonce } = nonces(opts);
  const at = opts.at === undefined ? new Date() : instant(opts.at);
  const cfg = config();
  const issuer = opts.issuer ?? cfg.issuer;
  return verifyResultTokenFile({
    token: text,
    at,
    ...(opts.jwks !== undefined ? { jwksFile: opts.jwks } : {}),
    ...(issuer !== undefined ? { issuer } : {}),
    ...(opts.audience !== undefined ? { audience: opts.audience } : {}),
    nonce: expectedNonce,
    json: opts.json === true,
    config: cfg,
  });
}

function isEmptyList(value: unknown): boolean {
  return Array.isArray(value) && value.length === 0;
}

/** The rejections a test key's wider trust can change: only these are re-run as a test key. */
const TEST_TRUST_REASONS = new Set(KINDS.flatMap((k) => k.verifyFile.testTrustReasons));

/** How far a verification got: the index of its failing check (as explain.ts ranks re-runs). */
function failedAt(outcome: VerifyOutcome): number {
  if (outcome.ok) return Number.POSITIVE_INFINITY;
  const i = outcome.checks.findIndex((c) => c.status === 'fail');
  return i === -1 ? outcome.checks.length : i;
}

function nonces(opts: Options): {
  expectedNonce: Uint8Array | null;
  serverNonce?: Uint8Array;
  deviceNonce?: Uint8Array;
} {
  if (
    opts.nonce !== undefined &&
    (opts.serverNonce !== undefined || opts.deviceNonce !== undefined)
  ) {
    throw usageError(
      'give --nonce (sessionless) or --server-nonce [--device-nonce] (session), not both',
    );
  }
  if (opts.deviceNonce !== undefined && opts.serverNonce === undefined)
    throw usageError('--device-nonce needs --server-nonce');
  if (opts.nonce !== undefined) {
    const nonce = bytesFlag(opts.nonce, '--nonce');
    // the service's expectedNonce rule: a shorter or longer one is a malformed request there
    if (nonce.length < TOKEN_NONCE_MIN || nonce.length > TOKEN_NONCE_MAX) {
      throw usageError(
        `--nonce must be ${TOKEN_NONCE_MIN} to ${TOKEN_NONCE_MAX} bytes, as the service requires of expectedNonce; got ${nonce.length}`,
      );
    }
    return { expectedNonce: nonce };
  }
  if (opts.serverNonce === undefined) return { expectedNonce: null };
  const serverNonce = bytesFlag(opts.serverNonce, '--server-nonce');
  const deviceNonce =
    opts.deviceNonce === undefined ? undefined : bytesFlag(opts.deviceNonce, '--device-nonce');
  if (deviceNonce && deviceNonce.length > DEVICE_NONCE_BYTES.max) {
    throw usageError(
      `--device-nonce must be ${DEVICE_NONCE_BYTES.min} to ${DEVICE_NONCE_BYTES.max} bytes, as the service requires of deviceNonce; got ${deviceNonce.length}`,
    );
  }
  const expectedNonce = finalNonce(serverNonce, deviceNonce);
  return { expectedNonce, serverNonce, ...(deviceNonce ? { deviceNonce } : {}) };
}

function instant(text: string): Date {
  return isoInstant(text, '--at', '2021-01-23T12:13:33Z');
}
