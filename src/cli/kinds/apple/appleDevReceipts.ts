import { Command } from 'commander';
import { decodeBase64 } from '../../../core/base64.js';
import { withAdmin } from '../../context.js';
import { usageError } from '../../errors.js';
import { printJson } from '../../output.js';

/** `attest dev receipts refresh`: a development receipt with a chosen risk metric, for a test key. */
export function appleDevReceiptsCommand(): Command {
  const receipts = new Command('receipts')
    .description('App Attest receipts made with the development CA, for keys of test API keys')
    .addHelpText(
      'after',
      '\nExample:\n  $ attest dev receipts refresh 2o0syRGn1HDKDv85d522XBC9nLqrHWHGnt/mJ5hWMQM= --risk-metric 9',
    );
  receipts
    .command('refresh')
    .description(
      "store a refreshed receipt with this risk metric for a test-mode key: the key's next assertion sees it",
    )
    .argument('<key-id>', 'the key id, base64 (as appleTokenDetails.keyIdentifier shows it)')
    .requiredOption('--risk-metric <n>', "Apple's risk metric to report (0 to 999999999)")
    .option('--json', 'print {"keyId","riskMetric","creationTime","expirationTime"}')
    .addHelpText(
      'after',
      `
The key must have been registered with a test API key and with a receipt
(attest dev mint apple --receipt). Live keys are refused.

Example:
  $ attest dev receipts refresh 2o0syRGn1HDKDv85d522XBC9nLqrHWHGnt/mJ5hWMQM= --risk-metric 9`,
    )
    .action(async (keyIdText: string, opts: { riskMetric: string; json?: boolean }) => {
      const keyId = decodeBase64(keyIdText.trim());
      if (!keyId || keyId.length !== 32)
        throw usageError(`"${keyIdText}" is not a key id: base64 of 32 bytes`);
      if (!/^\d{1,9}$/.test(opts.riskMetric))
        throw usageError(
          `--risk-metric "${opts.riskMetric}" is not an integer from 0 to 999999999`,
        );
      const riskMetric = Number(opts.riskMetric);
      const result = await withAdmin((admin) =>
        admin.run('dev.refreshReceipt', { keyId, riskMetric }),
      );
      const doc = {
        keyId: keyIdText.trim(),
        riskMetric: result.riskMetric,
        creationTime: result.creationTime.toISOString(),
        expirationTime: result.expirationTime?.toISOString() ?? null,
      };
      if (opts.json) printJson(doc);
      else
        process.stdout.write(
          `stored a development receipt for ${doc.keyId}: risk metric ${doc.riskMetric}, expires ${doc.expirationTime}\n`,
        );
    });
  return receipts;
}
