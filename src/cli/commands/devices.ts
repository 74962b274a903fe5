import { Command } from 'commander';
import { decodeBase64, encodeBase64 } from '../../core/base64.js';
import { withAdmin } from '../context.js';
import { formatDeviceLimit } from '../../core/policyFields.js';
import { CliError, EXIT, usageError } from '../errors.js';
import { printJson } from '../output.js';
import { safeText } from '../terminalText.js';
import { KINDS } from '../kinds/registry.js';

/** `attest devices`: registered keys (App Attest, android-key) seen as devices, with their verify counts. */
export function devicesCommand(): Command {
  const devices = new Command('devices')
    .description(
      'registered device keys (App Attest, android-key): their use and per-device verify counts',
    )
    .addHelpText(
      'after',
      '\nExample:\n  $ attest devices show 2o0syRGn1HDKDv85d522XBC9nLqrHWHGnt/mJ5hWMQM=',
    );

  devices
    .command('show')
    .description(
      "a key: service, app, registered at, last used, and its verifies in the current window of the app's --max-verifies-per-device",
    )
    .argument(
      '<key-id>',
      'the key id, base64 (appleTokenDetails.keyIdentifier or androidKeyDetails.keyIdentifier)',
    )
    .option('--json', 'print the facts as JSON')
    .addHelpText(
      'after',
      '\nExample:\n  $ attest devices show 2o0syRGn1HDKDv85d522XBC9nLqrHWHGnt/mJ5hWMQM= --json',
    )
    .action(async (keyIdText: string, opts: { json?: boolean }) => {
      const keyId = decodeBase64(keyIdText.trim());
      if (!keyId || keyId.length !== 32)
        throw usageError(`"${keyIdText}" is not a key id: base64 of 32 bytes`);
      const at = new Date();
      await withAdmin(async (admin) => {
        const views = await admin.run('devices.show', { keyId, at });
        if (views.length === 0)
          // a negative answer (exit 1), as keys update gives for an unknown key
          throw new CliError(
            `no App Attest or android-key key ${encodeBase64(keyId)} is registered`,
            EXIT.negative,
          );
        const docs = views.map((v) => ({
          keyId: encodeBase64(keyId),
          service: v.service,
          app: v.app,
          ...(v.environment !== null ? { environment: v.environment } : {}),
          mode: v.mode,
          registeredAt: v.registeredAt.toISOString(),
          lastUsedAt: v.lastUsedAt?.toISOString() ?? null,
          maxVerifiesPerDevice: v.limit,
          currentWindow: v.window && {
            start: v.window.start.toISOString(),
            end: v.window.end.toISOString(),
            verifies: v.window.count,
          },
        }));
        // one key id is one key: two rows would be an App Attest and an android-key key alike
        if (opts.json) {
          printJson(docs.length === 1 ? docs[0] : docs);
          return;
        }
        const text = views.map((v, i) => {
          const doc = docs[i]!;
          const counted = v.window
            ? `${v.window.count} of at most ${v.limit!.max} (${formatDeviceLimit(v.limit!)}; window ${doc.currentWindow!.start} to ${doc.currentWindow!.end})`
            : `not counted: ${v.app} sets no --max-verifies-per-device`;
          return [
            `key ${doc.keyId}: ${v.service} ${v.app}${v.environment ? ` (${v.environment})` : ''}${v.mode === 'test' ? ', registered with a test API key' : ''}`,
            `registered: ${doc.registeredAt}`,
            `last used: ${doc.lastUsedAt ?? KINDS.find((k) => k.service === v.service)?.unrecordedUse ?? 'never'}`,
            `verifies in the current window: ${counted}`,
          ]
            .map(safeText)
            .join('\n');
        });
        process.stdout.write(`${text.join('\n\n')}\n`);
      });
    });

  return devices;
}
