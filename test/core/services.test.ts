import { describe, expect, it } from 'vitest';
import {
  acceptedServiceNames,
  isService,
  serviceNamed,
  SERVICES,
} from '../../src/core/services.js';

describe('the service registry', () => {
  it('names the four services and maps each alias to its canonical name', () => {
    expect(SERVICES).toEqual(['apple', 'gms', 'android-key', 'gms-pc']);
    expect(['apple', 'gms', 'android', 'google'].map(serviceNamed)).toEqual([
      'apple',
      'gms',
      'gms',
      'gms',
    ]);
  });

  it('refuses other names, inherited object keys and other case', () => {
    for (const name of ['ios', 'Apple', 'GMS', '', 'toString', '__proto__', 'constructor'])
      expect(serviceNamed(name)).toBeUndefined();
    expect(isService('android')).toBe(false);
    expect(isService(undefined)).toBe(false);
  });

  it('lists what it accepts for messages', () => {
    expect(acceptedServiceNames()).toBe(
      'apple, or gms (android, google), or android-key, or gms-pc',
    );
  });
});
