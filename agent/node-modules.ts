// Node modules that only spawning modes need, loaded on first use: requiring child_process and
// net costs several milliseconds that `get` (which must start about as fast as node) never pays.
// Plain require, not import(): a dynamic import would also boot node's ESM loader.
/* eslint-disable @typescript-eslint/no-require-imports -- lazy loading is this module's purpose */
import type * as ChildProcessModule from 'node:child_process';
import type * as CryptoModule from 'node:crypto';
import type * as NetModule from 'node:net';

/** node:child_process, loaded on first call. */
export const childProcess = (): typeof ChildProcessModule => require('node:child_process') as typeof ChildProcessModule;
/** node:net, loaded on first call. */
export const net = (): typeof NetModule => require('node:net') as typeof NetModule;
/** node:crypto, loaded on first call. */
export const crypto = (): typeof CryptoModule => require('node:crypto') as typeof CryptoModule;
