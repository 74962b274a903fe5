import { readFileSync } from 'node:fs';
import { Command, CommanderError } from 'commander';
import { allowlistCommand } from './commands/allowlist.js';
import { appleCommand } from './commands/apple.js';
import { androidCommand } from './commands/android.js';
import { auditCommand } from './commands/audit.js';
import { completionCommand, completionIdsCommand } from './commands/completion.js';
import { dbCommand } from './commands/db.js';
import { devCommand } from './commands/dev.js';
import { keysCommand } from './commands/keys.js';
import { logsCommand } from './commands/logs.js';
import { resultKeysCommand } from './commands/resultKeys.js';
import { serveCommand } from './commands/serve.js';
import { statusCommand } from './commands/status.js';
import { tokenCommand } from './commands/token.js';
import { verifyFileCommand } from './commands/verifyFile.js';
import { cleanDatabaseError } from '../db/errors.js';
import { CliError, EXIT } from './errors.js';

/** The `attest` program with every subcommand. */
export function buildProgram(): Command {
  const program = new Command('attest')
    .description(
      'verify Apple App Attest, Google Play Integrity and Android key attestation tokens for relying parties',
    )
    .version(packageVersion())
    .option(
      '--actor <name>',
      'who makes administrative changes, for the audit trail (default: ATTEST_ACTOR, else user@host)',
    )
    .option(
      '--log',
      'also print each recorded change (audit event) on stderr as a JSON line; on a terminal they are not printed otherwise',
    )
    .addHelpText(
      'after',
      `
Examples:
  $ attest serve                                   start the API on the embedded database
  $ attest keys create --name "mobile banking"     issue an API key for a relying party
  $ attest allowlist add apple ABCDE12345.com.example.bank
  $ attest verify-file token.cbor --nonce <b64>    explain why a token is rejected
  $ attest --actor alice keys revoke 0h3k5x9q2m7c1b4n   recorded in "attest audit list"
  $ attest dev mint apple --app-id ABCDE12345.com.example.bank --device dev.json --nonce <b64>
                                                   a test token without a device (test API keys)`,
    );
  for (const command of [
    serveCommand(),
    dbCommand(),
    keysCommand(),
    resultKeysCommand(),
    allowlistCommand(),
    appleCommand(),
    auditCommand(),
    verifyFileCommand(),
    logsCommand(),
    devCommand(),
    tokenCommand(),
    statusCommand(),
    androidCommand(),
    completionCommand(() => program),
    completionIdsCommand(),
  ]) {
    // the completion scripts' helper is not a command for people
    program.addCommand(command, command.name() === '__complete-ids' ? { hidden: true } : {});
  }
  for (const command of [program, ...allCommands(program)]) {
    command.exitOverride();
    // usage errors are one line, like every other error, and say where the usage is
    command.configureOutput({
      outputError: (str, write) =>
        write(
          `attest: ${str
            .trim()
            .replace(/^error: /, '')
            .replace(/\s*\n\s*/g, ' ')} (run "${commandPath(command)} --help" for usage)\n`,
        ),
    });
  }
  return program;
}

/**
 * This package's own version. Not npm_package_version: npm sets that to the version of whatever
 * project `npm exec` runs in. src/cli and dist/cli both sit two levels below the package root.
 */
export function packageVersion(): string {
  const manifest = JSON.parse(
    readFileSync(new URL('../../package.json', import.meta.url), 'utf8'),
  ) as { version: string };
  return manifest.version;
}

function commandPath(command: Command): string {
  return command.parent ? `${commandPath(command.parent)} ${command.name()}` : command.name();
}

function allCommands(command: Command): Command[] {
  return command.commands.flatMap((c) => [c, ...allCommands(c)]);
}

/** Runs the CLI: one error funnel that prints one line and sets the exit code. */
export async function main(argv: string[]): Promise<number> {
  // `attest keys list | head`: a closed pipe is not an error
  process.stdout.on('error', (err: NodeJS.ErrnoException) => {
    if (err.code === 'EPIPE') process.exit(EXIT.ok);
    process.stderr.write(`attest: cannot write the output (${err.code ?? err.message})\n`);
    process.exit(EXIT.runtime);
  });
  const program = buildProgram();
  // the command whose action runs, so that its usage errors name its --help
  let acting: Command = program;
  program.hook('preAction', (_, actionCommand) => {
    acting = actionCommand;
  });
  try {
    await program.parseAsync(argv);
    return process.exitCode === undefined ? EXIT.ok : Number(process.exitCode);
  } catch (err) {
    if (err instanceof CommanderError) {
      // commander already printed its message (help, version, or a usage error)
      return err.exitCode === 0 ? EXIT.ok : EXIT.usage;
    }
    if (err instanceof CliError) {
      const message = err.message.replace(/\s+/g, ' ').trim();
      const hint =
        err.helpHint && !message.includes('--help')
          ? ` (run "${commandPath(acting)} --help" for usage)`
          : '';
      process.stderr.write(`attest: ${message}${hint}\n`);
      return err.exitCode;
    }
    process.stderr.write(`attest: unexpected failure: ${faultText(err)}\n`);
    return EXIT.runtime;
  }
}

/**
 * One line about an unexpected error. drizzle's messages carry the whole query and its parameters
 * (key hashes, Play Integrity key material), so only the driver's own cause is shown.
 */
function faultText(err: unknown): string {
  return cleanDatabaseError(err).slice(0, 500);
}
