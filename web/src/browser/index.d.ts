// Types of the `peft-bridge/browser` entry (browser/index.js): saving output files in a browser.
export { saveStreams } from '../index.js';
export type { DirectoryHandle } from '../index.js';
