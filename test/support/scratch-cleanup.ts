// vitest setup file (every test file): removes the file's scratch (scratch.ts) once it ends. Hooks
// after a file run in reverse order of registration, so this one, registered first, runs last.
import { afterAll } from 'vitest';
import { removeScratch } from './scratch.js';

afterAll(() => removeScratch());
