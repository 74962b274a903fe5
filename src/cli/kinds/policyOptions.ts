import { Option, type Command } from 'commander';
import { flagName, policyFromFlags, type PolicyField } from '../../core/policyFields.js';
import { usageError } from '../errors.js';

/** Adds a kind's policy flags to `command`, each followed by its `--no-` form, in table order. */
export function addPolicyOptions(command: Command, fields: readonly PolicyField<never>[]): Command {
  for (const field of fields) {
    if (field.flag === undefined) continue;
    const option = new Option(field.flag, field.help);
    if (field.choices) option.choices(field.choices);
    if (field.repeatable)
      option.argParser((value: string, previous: string[] | undefined) => [
        ...(previous ?? []),
        value,
      ]);
    command.addOption(option);
    if (field.no) command.option(`--no-${flagName(field).slice(2)}`, field.no.help);
  }
  return command;
}

/**
 * The policy fields `opts` set (a flag not given leaves the stored value); a bad value is a
 * usage error with the table's message.
 */
export function policyOptions<P>(
  fields: readonly PolicyField<never>[],
  opts: Readonly<Record<string, unknown>> | object,
): P {
  const parsed = policyFromFlags(fields, opts as Readonly<Record<string, unknown>>);
  if (!parsed.ok) throw usageError(parsed.problem);
  return parsed.value as P;
}
