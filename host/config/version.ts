// This build's version, written once: the build defines __HOST_VERSION__ from package.json; code
// run from source (the unit tests) has none and reports a development marker.
declare const __HOST_VERSION__: string;

/** package.json's version in a build, '0.0.0-dev' when run from source. */
export const HOST_VERSION = typeof __HOST_VERSION__ === 'string' ? __HOST_VERSION__ : '0.0.0-dev';
