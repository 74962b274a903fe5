import { readFileSync } from 'node:fs';
import { packageVersion } from '../packageVersion.js';
import { Command, CommanderError, Help } from 'commander';
import { cleanDatabaseError } from '../db/errors.js';
import { CliError, EXIT } from './errors.js';

/**
 * The top-level commands in the order `attest --help` lists them, with what that listing shows of
 * each (`term`, `description`), so that a run builds only the command it runs: importing every
 * command module (and through them the database drivers, argon2, pino, the verifiers) cost a
 * `keys list` or a tab completion several times node's own start-up. test/cli/commandList.test.ts
 * holds these equal to the commands' own.
 */
export const COMMANDS: readonly {
  name: string;
  term: string;
  description: string;
  hidden?: true;
  load: (program: Command) => Promise<Command>;
}[] = [
  {
    name: 'serve',
    term: 'serve [options]',
    description: 'run the HTTP API (applies pending migrations first)',
    load: async () => (await import('./commands/serve.js')).serveCommand(),
  },
  {
    name: 'db',
    term: 'db',
    description: 'database migrations and housekeeping',
    load: async () => (await import('./commands/db.js')).dbCommand(),
  },
  {
    name: 'keys',
    term: 'keys',
    description: 'API keys of relying parties',
    load: async () => (await import('./commands/keys.js')).keysCommand(),
  },
  {
    name: 'devices',
    term: 'devices',
    description:
      'registered device keys (App Attest, android-key): their use and per-device verify counts',
    load: async () => (await import('./commands/devices.js')).devicesCommand(),
  },
  {
    name: 'result-keys',
    term: 'result-keys',
    description:
      'the keys that sign result tokens (published at /.well-known/jwks.json; test-mode keys at /.well-known/jwks-test.json)',
    load: async () => (await import('./commands/resultKeys.js')).resultKeysCommand(),
  },
  {
    name: 'allowlist',
    term: 'allowlist',
    description: 'apps and packages whose tokens are accepted',
    load: async () => (await import('./commands/allowlist.js')).allowlistCommand(),
  },
  {
    name: 'apple',
    term: 'apple',
    description: "App Attest receipts: DeviceCheck keys for Apple's risk metric, stored receipts",
    load: async () => (await import('./commands/apple.js')).appleCommand(),
  },
  {
    name: 'audit',
    term: 'audit',
    description: 'the append-only trail of administrative changes (who changed what, when)',
    load: async () => (await import('./commands/audit.js')).auditCommand(),
  },
  {
    name: 'captures',
    term: 'captures',
    description:
      'tokens serve kept for replay (ATTEST_CAPTURE): list them, get one, verify-file --capture ID',
    load: async () => (await import('./commands/captures.js')).capturesCommand(),
  },
  {
    name: 'stats',
    term: 'stats [options]',
    description:
      'verification counts of every instance: valid, rejected, observed and errors, per app (or key, service, reason, minute)',
    load: async () => (await import('./commands/stats.js')).statsCommand(),
  },
  {
    name: 'verify-file',
    term: 'verify-file [options] [token]',
    description:
      'check a token offline, step by step, and explain why it is rejected (changes no state)',
    load: async () => (await import('./commands/verifyFile.js')).verifyFileCommand(),
  },
  {
    name: 'logs',
    term: 'logs [options] [files...]',
    description: 'browse the service log: a viewer on a terminal, filtered plain lines otherwise',
    load: async () => (await import('./commands/logs.js')).logsCommand(),
  },
  {
    name: 'dev',
    term: 'dev',
    description: 'development roots and test tokens for test-mode API keys (no device needed)',
    load: async () => (await import('./commands/dev.js')).devCommand(),
  },
  {
    name: 'token',
    term: 'token',
    description: 'build format-1 tokens from evidence an app captured',
    load: async () => (await import('./commands/token.js')).tokenCommand(),
  },
  {
    name: 'status',
    term: 'status [options]',
    description:
      'what this deployment is: database, schema state, master key id, running server, test keys, Android status list age, receipt refresh state',
    load: async () => (await import('./commands/status.js')).statusCommand(),
  },
  {
    name: 'android',
    term: 'android',
    description: 'Android hardware key attestation (android-key): the attestation status list',
    load: async () => (await import('./commands/android.js')).androidCommand(),
  },
  {
    name: 'completion',
    term: 'completion <shell>',
    description: 'print a shell completion script for bash, zsh or fish',
    load: async (program) =>
      (await import('./commands/completion.js')).completionCommand(() => program),
  },
  {
    // the completion scripts' helper is not a command for people
    name: '__complete-ids',
    term: '__complete-ids <kind>',
    description: '',
    hidden: true,
    load: async () => (await import('./commands/completion.js')).completionIdsCommand(),
  },
];

/**
 * The `attest` program. With `args` (the words after `attest`), only the command they run is
 * built; the others are placeholders with their name and description, which is all that `attest
 * --help`, an unknown command's suggestion and a run of another command use of them. Without
 * `args`, every command is built (the completion scripts are generated from the whole tree).
 */
export async function buildProgram(args?: readonly string[]): Promise<Command> {
  const wanted = args === undefined ? ALL : commandRun(args);
  const placeholders = new Map<Command, string>();
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
    .configureHelp({
      // a placeholder has no options or arguments of its own: its listing says what the command's would
      subcommandTerm(command) {
        return placeholders.get(command) ?? Help.prototype.subcommandTerm.call(this, command);
      },
    })
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
  const built = await Promise.all(
    COMMANDS.map(async (entry) => {
      if (wanted === ALL || wanted === entry.name) return entry.load(program);
      const placeholder = new Command(entry.name).description(entry.description);
      placeholders.set(placeholder, entry.term);
      return placeholder;
    }),
  );
  COMMANDS.forEach((entry, i) =>
    program.addCommand(built[i]!, entry.hidden ? { hidden: true } : {}),
  );
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

const ALL = Symbol('every command');

/**
 * The top-level command commander will run for `args`, found as its option parser finds it: the
 * first operand, after the root's own options (`--actor <name>`, `--log`, `--version`); the one
 * after `help` for `attest help <command>`. Every command when in doubt (a group of short flags),
 * and for `completion`, whose scripts describe them all; undefined when none runs (`--help`).
 */
export function commandRun(args: readonly string[]): string | typeof ALL | undefined {
  const operands: string[] = [];
  for (let i = 0; i < args.length && operands.length < 2; i++) {
    const arg = args[i]!;
    if (arg === '--') {
      operands.push(...args.slice(i + 1));
      break;
    }
    if (arg === '--actor') i++;
    else if (arg.startsWith('--actor=') || ['--log', '--version', '-V'].includes(arg)) continue;
    else if (/^-V./.test(arg)) return ALL;
    // any other option is not the root's: commander takes no operand after it
    else if (arg.length > 1 && arg.startsWith('-')) break;
    else operands.push(arg);
  }
  const name = operands[0] === 'help' ? operands[1] : operands[0];
  return name === 'completion' ? ALL : name;
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
  const program = await buildProgram(argv.slice(2));
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
