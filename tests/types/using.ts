// `using` needs the runtime's explicit resource management and TypeScript's `esnext.disposable` lib: compiled
// by tsconfig.json only; usage.ts (everything else) also compiles under `lib: ["es2022"]` (tsconfig.es2022.json).
import { createWriter } from '../../web/src/index.js';

export async function scopedWriter(): Promise<void> {
  using scoped = await createWriter({ tensors: [], order: 'input' });
  scoped.abort(new Error('not needed'));
}
