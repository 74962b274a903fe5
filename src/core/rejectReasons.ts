import { KINDS } from './kinds.js';
import { SHARED_REASONS, type RejectReason } from './reasons.js';

/** Every rejection reason of docs/token-format.md section 7 and the platform sections. */
export const REJECT_REASONS: readonly RejectReason[] = [
  ...SHARED_REASONS,
  ...KINDS.flatMap((k) => k.reasons),
];
