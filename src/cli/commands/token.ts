import { Command } from 'commander';
import { KINDS } from '../kinds/registry.js';

export function tokenCommand(): Command {
  const examples = `
Examples:
${KINDS.map((k) => `  ${k.examples.token}`).join('\n')}`;
  const token = new Command('token')
    .description('build format-1 tokens from evidence an app captured')
    .addHelpText('after', examples);
  const wrap = token
    .command('wrap')
    .description('wrap raw platform evidence into a format-1 token (base64 on stdout)')
    .addHelpText('after', examples);
  for (const kind of KINDS) wrap.addCommand(kind.wrapCommand());

  return token;
}
