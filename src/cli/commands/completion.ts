import { Argument, Command, type Option } from 'commander';
import { withAdmin } from '../context.js';

/** The hidden command the completion scripts call for values that live in the database. */
const IDS_COMMAND = '__complete-ids';
/** Where a value from the database is completed: the command path and the word before it. */
const DYNAMIC: { path: string; prev: string; kind: 'keys' | 'apple' | 'android' }[] = [
  { path: 'attest keys revoke', prev: 'revoke', kind: 'keys' },
  { path: 'attest allowlist remove', prev: 'apple', kind: 'apple' },
  { path: 'attest allowlist remove', prev: 'android', kind: 'android' },
  { path: 'attest allowlist add android', prev: 'android', kind: 'android' },
];

/**
 * `attest __complete-ids keys|apple|android`: the active API key ids, or the allowlisted app IDs
 * or packages, one a line, for the completion scripts. Silent on any failure (no database, a
 * busy one): a completion must never print an error into the command line.
 */
export function completionIdsCommand(): Command {
  return new Command(IDS_COMMAND)
    .argument('<kind>')
    .addHelpText(
      'after',
      '\nExample (what the completion scripts run):\n  $ attest __complete-ids keys',
    )
    .action(async (kind: string) => {
      try {
        // through the running server when there is one: completing must work while it serves
        const ids = await withAdmin(async (admin) => {
          if (kind === 'keys')
            return (await admin.run('keys.list', {})).filter((k) => !k.revokedAt).map((k) => k.id);
          const all = await admin.run('allowlist.ids', {});
          return kind === 'apple' ? all.apple : kind === 'android' ? all.android : [];
        });
        if (ids.length > 0) process.stdout.write(`${ids.join('\n')}\n`);
      } catch {
        // nothing to offer
      }
    });
}

/** A command of the tree, flattened for the scripts: its path, subcommands, options and value choices. */
interface Node {
  path: string;
  subcommands: { name: string; description: string }[];
  options: { flag: string; description: string; takesValue: boolean; choices: string[] }[];
  /** choices of its first argument (`completion bash|zsh|fish`) */
  argumentChoices: string[];
}

/** `attest completion bash|zsh|fish`: the script is generated from the command tree, so it never drifts. */
export function completionCommand(root: () => Command): Command {
  return new Command('completion')
    .description('print a shell completion script for bash, zsh or fish')
    .addArgument(new Argument('<shell>', 'bash, zsh or fish').choices(['bash', 'zsh', 'fish']))
    .addHelpText(
      'after',
      `
Examples:
  $ source <(attest completion bash)                              # this shell; add it to ~/.bashrc to keep it
  $ attest completion zsh > "\${fpath[1]}/_attest"                  # zsh, then restart it
  $ attest completion fish > ~/.config/fish/completions/attest.fish`,
    )
    .action((shell: 'bash' | 'zsh' | 'fish') => {
      const nodes = flatten(root());
      process.stdout.write(
        shell === 'fish'
          ? fishScript(nodes)
          : shell === 'zsh'
            ? zshScript(nodes)
            : bashScript(nodes),
      );
    });
}

function flatten(command: Command, prefix = ''): Node[] {
  const path = prefix ? `${prefix} ${command.name()}` : command.name();
  const visible = command.commands.filter((c) => c.name() !== IDS_COMMAND);
  const options: Node['options'] = [
    ...command.options.filter((o) => !o.hidden).map(optionOf),
    // commander adds --help outside `options`
    { flag: '--help', description: 'display help', takesValue: false, choices: [] },
  ];
  const first = command.registeredArguments[0];
  const node: Node = {
    path,
    subcommands: visible.map((c) => ({ name: c.name(), description: c.description() })),
    options: [...options, ...(command.parent ? globalOptions(command) : [])].filter((o) => o.flag),
    argumentChoices: first?.argChoices ?? [],
  };
  return [node, ...visible.flatMap((c) => flatten(c, path))];
}

/** The root's options (`--actor`) are accepted after any subcommand too. */
function globalOptions(command: Command): Node['options'] {
  let root = command;
  while (root.parent) root = root.parent;
  return root.options.filter((o) => o.long !== '--version').map(optionOf);
}

function optionOf(o: Option): Node['options'][number] {
  return {
    flag: o.long ?? o.short ?? '',
    description: o.description,
    takesValue: o.required || o.optional,
    choices: o.argChoices ?? [],
  };
}

const quote = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;

function bashScript(nodes: Node[]): string {
  const known = nodes
    .filter((n) => n.subcommands.length)
    .flatMap((n) => n.subcommands.map((s) => `${n.path} ${s.name}`));
  const words = nodes.map(
    (n) =>
      `    ${quote(n.path)}) words=${quote([...n.subcommands.map((s) => s.name), ...n.argumentChoices, ...n.options.map((o) => o.flag)].join(' '))} ;;`,
  );
  const valued = nodes.flatMap((n) =>
    n.options
      .filter((o) => o.takesValue)
      .map(
        (o) =>
          `    ${quote(`${n.path} ${o.flag}`)}) ${o.choices.length ? `COMPREPLY=($(compgen -W ${quote(o.choices.join(' '))} -- "$cur"))` : 'COMPREPLY=($(compgen -f -- "$cur"))'}; return ;;`,
      ),
  );
  return `# attest completion for bash (generated by "attest completion bash")
_attest_complete() {
  local cur="\${COMP_WORDS[COMP_CWORD]}" prev="\${COMP_WORDS[COMP_CWORD-1]}" path=attest words i w
  for ((i = 1; i < COMP_CWORD; i++)); do
    w="\${COMP_WORDS[i]}"
    case "$path $w" in
${known.map((k) => `    ${quote(k)}) path="$path $w" ;;`).join('\n')}
    esac
  done
  case "$path $prev" in
${valued.join('\n')}
  esac
  if [[ "$cur" != -* ]]; then
    case "$path|$prev" in
${DYNAMIC.map((d) => `    ${quote(`${d.path}|${d.prev}`)}) COMPREPLY=($(compgen -W "$("\${COMP_WORDS[0]}" ${IDS_COMMAND} ${d.kind} 2>/dev/null)" -- "$cur")); return ;;`).join('\n')}
    esac
  fi
  case "$path" in
${words.join('\n')}
  esac
  COMPREPLY=($(compgen -W "$words" -- "$cur"))
}
complete -o default -F _attest_complete attest
`;
}

function zshScript(nodes: Node[]): string {
  // zsh runs the bash function through its bash completion layer: one implementation to keep right
  return `#compdef attest
# attest completion for zsh (generated by "attest completion zsh")
autoload -U +X bashcompinit && bashcompinit
${bashScript(nodes)}`;
}

function fishScript(nodes: Node[]): string {
  const known = nodes
    .filter((n) => n.subcommands.length)
    .flatMap((n) => n.subcommands.map((s) => `${n.path} ${s.name}`));
  const lines = nodes.flatMap((n) => {
    const when = `-n ${quote(`test (__attest_path) = ${JSON.stringify(n.path)}`)}`;
    return [
      ...n.subcommands.map(
        (s) => `complete -c attest ${when} -a ${quote(s.name)} -d ${quote(s.description)}`,
      ),
      ...(n.argumentChoices.length
        ? [`complete -c attest ${when} -a ${quote(n.argumentChoices.join(' '))}`]
        : []),
      ...n.options.map((o) => {
        const flag = o.flag.startsWith('--') ? `-l ${o.flag.slice(2)}` : `-s ${o.flag.slice(1)}`;
        const value = o.choices.length
          ? ` -x -a ${quote(o.choices.join(' '))}`
          : o.takesValue
            ? ' -r'
            : '';
        return `complete -c attest ${when} ${flag}${value} -d ${quote(o.description)}`;
      }),
    ];
  });
  const dynamic = DYNAMIC.map(
    (d) =>
      `complete -c attest -n ${quote(`test (__attest_path) = ${JSON.stringify(d.path)}; and __fish_seen_subcommand_from ${d.prev}`)} -a ${quote(`(attest ${IDS_COMMAND} ${d.kind} 2>/dev/null)`)}`,
  );
  lines.push(...dynamic);
  return `# attest completion for fish (generated by "attest completion fish")
set -g __attest_commands ${known.map(quote).join(' ')}
function __attest_path
    set -l path attest
    for w in (commandline -opc)[2..-1]
        if contains -- "$path $w" $__attest_commands
            set path "$path $w"
        end
    end
    echo $path
end
complete -c attest -f
${lines.join('\n')}
`;
}
