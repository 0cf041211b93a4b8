// Compile-only check of the published types (web/src/index.d.ts): `tsc -p tests/types` must pass.
// Each line is how an application would use the API; wrong types here fail the test suite.
import {
  init, inspect, readSafetensors, createWriter, writeSafetensors, convert, SafetensorsError,
  adapterInfo, translateAdapter,
  type Header, type ReadEvent, type SafetensorsErrorCode, type WriteLayout, type AdapterInfo, type TranslateResult,
} from '../../web/src/index.js';

export async function adapters(weights: Blob, stream: ReadableStream<Uint8Array>, config: string) {
  const info: AdapterInfo = await adapterInfo({ weights, config }, { arch: 'llama', strict: true });
  const ranks: number[] = info.modules.map((m) => m.rank * m.scaling);
  const result: TranslateResult = await translateAdapter(
    { weights: stream, config: { peft_type: 'LORA', r: 8 }, baseConfig: new Uint8Array(2), weightsName: 'adapters.safetensors' },
    { to: 'gguf-names', from: 'mlx', dryRun: false, oldPeft: false },
  );
  for (const p of result.plan) ranks.push(p.to === null ? p.reason.length : p.action.length);
  const bytes: Uint8Array[] = result.files.map((f) => f.bytes);
  return [info.format, info.extras[0]?.kind, ranks, bytes, result.notes] as const;
}

export async function usage(bytes: Uint8Array, blob: Blob, stream: ReadableStream<Uint8Array>, module: WebAssembly.Module) {
  await init({ wasmModule: module });
  await init({ wasmBinary: new ArrayBuffer(8) });

  const header: Header = await inspect(blob);
  const sizes: number[] = [header.headerSize, header.dataSize, header.fileSize];
  for (const t of header.tensors) {
    const shape: number[] = t.shape;
    const [begin, end]: [number, number] = t.dataOffsets;
    sizes.push(begin, end, t.byteLength, ...shape);
  }
  const meta: Record<string, string> | null = header.metadata;

  const controller = new AbortController();
  for await (const ev of readSafetensors(stream, { signal: controller.signal, onProgress: (p) => p.bytesRead })) {
    const e: ReadEvent = ev;
    if (e.type === 'data') sizes.push(e.offset, e.bytes.byteLength, e.tensorIndex);
    else if (e.type === 'header') sizes.push(e.header.tensors.length);
  }

  const writer = await createWriter({ tensors: [{ name: 'w', dtype: 'F32', shape: [2] }], metadata: { format: 'pt' }, order: 'reference' });
  const layout: WriteLayout = writer.layout;
  const out: ReadableStream<Uint8Array> = writer.readable;
  await writer.write(new Float32Array([1, 2]));
  await writer.close();
  writer[Symbol.dispose]();

  const whole: ReadableStream<Uint8Array> = writeSafetensors({
    tensors: [{ name: 'b', dtype: 'BF16', shape: [1], data: new Uint8Array(2) }],
    signal: controller.signal,
  });
  const converted: ReadableStream<Uint8Array> = convert(bytes, { dtype: 'bf16', order: 'reference', onProgress: (p) => p.bytesWritten });

  try {
    await inspect(new Uint8Array(3));
  } catch (error) {
    if (error instanceof SafetensorsError) {
      const code: SafetensorsErrorCode = error.code;
      const where: number | null = error.offset;
      const tensor: string | null = error.tensor;
      return [code, where, tensor, layout, out, whole, converted, meta, sizes];
    }
  }
  return null;
}
