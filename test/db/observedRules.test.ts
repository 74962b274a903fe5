import { describe, expect, it } from 'vitest';
import { createAllowlistRepository } from '../../src/db/allowlist.js';
import { createAuditRepository, type Auditor } from '../../src/db/audit.js';
import { backends, useDatabase } from '../support/databases.js';
import { TEST_SECRETS } from '../support/secrets.js';

describe.each(backends())('observed rules stored on $name', (backend) => {
  const handle = useDatabase(backend);
  const auditor: Auditor = { actor: 'ops@test', log: () => {} };
  const repo = () => createAllowlistRepository(handle.db, TEST_SECRETS);
  const events = async (target: string) =>
    (await createAuditRepository(handle.db).list()).filter((e) => e.target === target);
  const appleObserve = async (appId: string) =>
    (await repo().listApple()).find((a) => a.appId === appId)!.observe;
  const androidObserve = async (name: string) =>
    (await repo().listAndroid()).find((p) => p.packageName === name)!.observe;

  it('apple: a new app observes nothing; --observe adds, --enforce removes, --enforce all empties; each change audited before and after', async () => {
    const app = 'ABCDE12345.com.observe';
    await repo().addApple(app, undefined, auditor);
    expect(await appleObserve(app)).toEqual([]);

    await repo().addApple(app, undefined, auditor, {
      observeChange: { observe: ['apple_risk_exceeded'] },
    });
    await repo().addApple(app, undefined, auditor, {
      observeChange: { observe: ['apple_receipt_invalid', 'apple_risk_exceeded'] },
    });
    // the table's order, each code once
    expect(await appleObserve(app)).toEqual(['apple_receipt_invalid', 'apple_risk_exceeded']);

    // another policy flag alone keeps the set
    await repo().addApple(app, undefined, auditor, { requireReceipt: true });
    expect(await appleObserve(app)).toEqual(['apple_receipt_invalid', 'apple_risk_exceeded']);

    const removed = await repo().addApple(app, undefined, auditor, {
      observeChange: { enforce: ['apple_risk_exceeded'] },
    });
    expect(removed.policy.observe).toEqual(['apple_receipt_invalid']);
    const emptied = await repo().addApple(app, undefined, auditor, {
      observeChange: { enforce: 'all' },
    });
    expect(emptied.policy.observe).toEqual([]);
    // enforcing what is not observed changes nothing, and records nothing
    const unchanged = await repo().addApple(app, undefined, auditor, {
      observeChange: { enforce: ['apple_risk_exceeded'] },
    });
    expect(unchanged.result).toBe('unchanged');

    const trail = (await events(`apple:${app}`)).map((e) => [
      e.action,
      (e.before as { observe?: string[] } | null)?.observe,
      (e.after as { observe?: string[] }).observe,
    ]);
    expect(trail).toEqual([
      ['allowlist.add', undefined, []],
      ['allowlist.update', [], ['apple_risk_exceeded']],
      [
        'allowlist.update',
        ['apple_risk_exceeded'],
        ['apple_receipt_invalid', 'apple_risk_exceeded'],
      ],
      [
        'allowlist.update',
        ['apple_receipt_invalid', 'apple_risk_exceeded'],
        ['apple_receipt_invalid', 'apple_risk_exceeded'],
      ],
      [
        'allowlist.update',
        ['apple_receipt_invalid', 'apple_risk_exceeded'],
        ['apple_receipt_invalid'],
      ],
      ['allowlist.update', ['apple_receipt_invalid'], []],
    ]);
  });

  it('apple: a new app may observe at once, and enforce all then observe sets exactly those', async () => {
    const app = 'ABCDE12345.com.fresh';
    const added = await repo().addApple(app, 'any', auditor, {
      observeChange: { observe: ['apple_distribution_not_allowed'] },
    });
    expect(added.policy.observe).toEqual(['apple_distribution_not_allowed']);
    const replaced = await repo().addApple(app, undefined, auditor, {
      observeChange: { enforce: 'all', observe: ['apple_environment_not_allowed'] },
    });
    expect(replaced.policy.observe).toEqual(['apple_environment_not_allowed']);
  });

  it('the statement keeps only codes observable for the entry: an identity code or another platform code never lands', async () => {
    const app = 'ABCDE12345.com.guard';
    const added = await repo().addApple(app, undefined, auditor, {
      observeChange: {
        observe: ['apple_signature_invalid', 'gms_play_protect', 'apple_risk_exceeded'],
      },
    });
    expect(added.policy.observe).toEqual(['apple_risk_exceeded']);
    await repo().addAndroid(
      'com.guard',
      null,
      {
        keyAttestation: true,
        observeChange: {
          observe: ['gms_certificate_mismatch', 'apple_risk_exceeded', 'gms_play_protect'],
        },
      },
      auditor,
    );
    expect(await androidObserve('com.guard')).toEqual(['gms_play_protect']);
  });

  it('android: one set for gms and android-key codes, changed like every other policy field, audited', async () => {
    const pkg = 'com.example.observe';
    await repo().addAndroid(pkg, null, { keyAttestation: true }, auditor);
    expect(await androidObserve(pkg)).toEqual([]);
    await repo().addAndroid(
      pkg,
      null,
      {
        observeChange: {
          observe: ['android_patch_level_stale', 'gms_play_protect', 'gms_integrity_insufficient'],
        },
      },
      auditor,
    );
    expect(await androidObserve(pkg)).toEqual([
      'gms_integrity_insufficient',
      'gms_play_protect',
      'android_patch_level_stale',
    ]);
    // a policy change without the flags keeps the set
    await repo().addAndroid(pkg, null, { maxAgeSeconds: 120 }, auditor);
    expect(await androidObserve(pkg)).toHaveLength(3);
    await repo().addAndroid(
      pkg,
      null,
      { observeChange: { enforce: ['gms_play_protect'] } },
      auditor,
    );
    expect(await androidObserve(pkg)).toEqual([
      'gms_integrity_insufficient',
      'android_patch_level_stale',
    ]);
    await repo().addAndroid(pkg, null, { observeChange: { enforce: 'all' } }, auditor);
    expect(await androidObserve(pkg)).toEqual([]);

    const trail = (await events(`android:${pkg}`)).map((e) => [
      (e.before as { observe?: string[] } | null)?.observe,
      (e.after as { observe?: string[] }).observe,
    ]);
    expect(trail).toEqual([
      [undefined, []],
      [[], ['gms_integrity_insufficient', 'gms_play_protect', 'android_patch_level_stale']],
      [
        ['gms_integrity_insufficient', 'gms_play_protect', 'android_patch_level_stale'],
        ['gms_integrity_insufficient', 'gms_play_protect', 'android_patch_level_stale'],
      ],
      [
        ['gms_integrity_insufficient', 'gms_play_protect', 'android_patch_level_stale'],
        ['gms_integrity_insufficient', 'android_patch_level_stale'],
      ],
      [['gms_integrity_insufficient', 'android_patch_level_stale'], []],
    ]);
  });

  it('two changes at once both apply: the set is computed in the statement from the stored one', async () => {
    const app = 'ABCDE12345.com.race';
    await repo().addApple(app, undefined, auditor);
    await Promise.all([
      repo().addApple(app, undefined, auditor, {
        observeChange: { observe: ['apple_risk_exceeded'] },
      }),
      repo().addApple(app, undefined, auditor, {
        observeChange: { observe: ['apple_receipt_invalid'] },
      }),
    ]);
    expect(await appleObserve(app)).toEqual(['apple_receipt_invalid', 'apple_risk_exceeded']);
  });
});
