import { describe, expect, it } from 'vitest';
import { checkAppScope, keyAllowsApp } from '../../src/core/appScope.js';
import { Rejection } from '../../src/core/reasons.js';

describe('keyAllowsApp: what a key of a scope may see', () => {
  it('a key without a scope sees every app', () => {
    expect(keyAllowsApp(null, 'com.example.any')).toBe(true);
    expect(keyAllowsApp(undefined, 'ABCDE12345.com.example.any')).toBe(true);
  });
  it('a scoped key sees exactly its app IDs and packages (exact, case-sensitive)', () => {
    const scope = ['ABCDE12345.com.example.app', 'com.example.app'];
    expect(keyAllowsApp(scope, 'ABCDE12345.com.example.app')).toBe(true);
    expect(keyAllowsApp(scope, 'com.example.app')).toBe(true);
    expect(keyAllowsApp(scope, 'com.example.App')).toBe(false);
    expect(keyAllowsApp(scope, 'com.example.app.lite')).toBe(false);
    expect(keyAllowsApp(scope, 'ABCDE12345.com.example')).toBe(false);
    expect(keyAllowsApp([], 'com.example.app')).toBe(false);
  });
  it('checkAppScope throws the rejection app_not_in_key_scope naming the app, or nothing', () => {
    expect(() => checkAppScope(null, 'com.example.app', 'package')).not.toThrow();
    let thrown: unknown;
    try {
      checkAppScope(['com.example.other'], 'com.example.app', 'package');
    } catch (err) {
      thrown = err;
    }
    expect(thrown).toBeInstanceOf(Rejection);
    expect(thrown).toMatchObject({
      reason: 'app_not_in_key_scope',
      detail: expect.stringContaining('package "com.example.app"'),
    });
  });
});
