import { Box, Text } from 'ink';
import { fit } from './formatLog.js';
import type { LogEntry } from './logRecord.js';
import { detailLines, type DetailLine } from './viewLayout.js';

const TONE_COLOR: Readonly<Record<NonNullable<DetailLine['tone']>, string | undefined>> = {
  good: 'green',
  bad: 'red',
  warn: 'yellow',
  dim: undefined,
};

/** Props of {@link DetailPane}. */
export interface DetailPaneProps {
  /** The selected line, if any. */
  readonly entry: LogEntry | undefined;
  /** Its position among the visible lines, for the title. */
  readonly position: string;
  readonly width: number;
  /** Lines of text (the title line is extra). */
  readonly height: number;
  /** Lines scrolled past (J/K); clamped here to what the record has. */
  readonly scroll: number;
}

/** The whole record of the selected line, one field a line, long values wrapped. */
export function DetailPane({ entry, position, width, height, scroll }: DetailPaneProps) {
  const lines = entry === undefined ? [] : detailLines(entry, width - 1);
  const keyWidth = Math.min(16, Math.max(4, ...lines.map((l) => l.key.length)));
  const maxScroll = Math.max(0, lines.length - height);
  const from = Math.min(scroll, maxScroll);
  const shown = lines.slice(from, from + height);
  const more = lines.length - from - shown.length;
  const title = `─ record ${position} ${from > 0 ? `· ↑${from} ` : ''}${more > 0 ? `· ↓${more} more (J/K) ` : ''}`;
  return (
    <Box flexDirection="column" width={width} height={height + 1}>
      <Text dimColor wrap="truncate">
        {title.padEnd(width, '─')}
      </Text>
      {shown.map((line, i) => (
        <Text key={i} wrap="truncate">
          {' '}
          <Text bold color="gray">
            {fit(line.key, keyWidth)}
          </Text>
          {'  '}
          <Text
            color={line.tone ? TONE_COLOR[line.tone] : undefined}
            dimColor={line.tone === 'dim'}
          >
            {line.value}
          </Text>
        </Text>
      ))}
    </Box>
  );
}
