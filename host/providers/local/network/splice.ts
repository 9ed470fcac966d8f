// Joining two connections into one stream each way, for the egress proxy's tunnels and the
// exposed ports' forwards.
import type { Duplex } from 'node:stream';

/** Pipes `a` and `b` into each other (with backpressure) until either closes; an error on one ends both. */
export function splice(a: Duplex, b: Duplex): void {
  const end = (): void => {
    a.destroy();
    b.destroy();
  };
  a.on('error', end);
  b.on('error', end);
  a.on('close', end);
  b.on('close', end);
  a.pipe(b);
  b.pipe(a);
}
