// The package's `peft-bridge/browser` entry: saving output files in a browser (saveStreams), without the WebAssembly
// module or the rest of the API.
export { saveStreams } from './save-streams.js';
