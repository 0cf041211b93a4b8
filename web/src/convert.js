// convert(): dtype conversion of a whole file, streamed. Input order works on any source (StreamingConverter);
// reference order needs random access: the plan names each output tensor's source range and those ranges are
// read in plan order (TensorBytesConverter), as the native CLI does with pread.
import { SafetensorsError, abortReason, throwIfAborted } from './errors.js';
import { NativeHandle } from './handles.js';
import { feedRandomHeader, headerFromHandle } from './inspect.js';
import { getModule } from './init.js';
import { openSource, raceAbort } from './sources.js';

/**
 * Starts a conversion. Returns the output stream and a promise of the summary (with the core's text and JSON
 * renderings, which the CLI prints). Internal; the public entry point is convert().
 */
export function createConversion(source, options = {}) {
  // onPlan(text): the core's text summary, once the header is planned and before any tensor is read (the CLI
  // prints it before the work starts).
  const { signal, onProgress, onPlan } = options;
  if (options.dtype == null) throw new TypeError("peft-bridge: convert needs {dtype: 'bf16' | 'f16' | 'f32'}");
  const target = String(options.dtype); // any spelling of the CLIs' vocabulary, checked by the core
  // The CLI's default, so that convert(file) writes the bytes `peft-bridge convert` writes.
  const order = options.order ?? 'reference';
  if (order !== 'input' && order !== 'reference') throw new TypeError("peft-bridge: order must be 'reference' or 'input'");

  let resolveSummary, rejectSummary;
  const summary = new Promise((resolve, reject) => {
    resolveSummary = resolve;
    rejectSummary = reject;
  });
  summary.catch(() => {}); // the stream reports the same failure; an unobserved summary must not crash Node

  let module, src, handle, onAbort;
  let bytesRead = 0;
  let bytesWritten = 0;
  let outputSize = null;
  let ranges = null; // random access: [begin, end) per planned tensor
  let range = 0;
  let rangePos = 0;
  let finished = false;

  const cleanup = async (reason) => {
    if (onAbort) signal?.removeEventListener('abort', onAbort);
    handle?.close();
    const s = src;
    src = null;
    await s?.close(reason);
  };
  const fail = async (error) => {
    rejectSummary(error);
    await cleanup(error);
    throw error;
  };
  const emit = (controller, bytes) => {
    if (!bytes) return false;
    bytesWritten += bytes.length;
    controller.enqueue(bytes);
    return true;
  };
  const progress = () => onProgress?.({ bytesRead, bytesWritten, inputSize: src?.size ?? null, outputSize });
  const done = async (controller) => {
    emit(controller, handle.call('finish'));
    const native = handle.handle;
    const json = native.summaryJson();
    const info = JSON.parse(json);
    finished = true;
    progress();
    resolveSummary({
      tensors: info.tensors,
      converted: info.converted,
      inputSize: info.inputSize,
      outputSize: info.outputSize,
      header: headerFromHandle(handle.module, native),
      text: native.summaryText(),
      json,
    });
    await cleanup();
    controller.close();
  };

  const readable = new ReadableStream({
    async start(controller) {
      try {
        throwIfAborted(signal);
        module = await getModule();
        src = await openSource(source, { readSize: options.readSize, signal });
        if (order === 'reference' && !src.random)
          throw new SafetensorsError(
            'InvalidArgument',
            `reference order${options.order === undefined ? " (the default, the CLI's)" : ''} needs a random-access source (Uint8Array, ArrayBuffer, Blob, {size, read} or in Node a file path); pass order: "input" for a stream`,
          );
        onAbort = () => {
          const reason = abortReason(signal);
          rejectSummary(reason);
          try {
            controller.error(reason);
          } catch {
            // already errored or closed
          }
          cleanup(reason);
        };
        signal?.addEventListener('abort', onAbort, { once: true });
        if (src.random) {
          handle = new NativeHandle(module, new module.RangeConverter(target, src.size, order), options.windowSize);
          if (!handle.handle.ok()) handle.call('ok');
          // The output header is enqueued once onPlan has run: a reader of the first chunk has the plan too.
          const head = [];
          const onChunks = (chunks) => chunks.forEach((c) => head.push(c.bytes));
          bytesRead = await feedRandomHeader(handle, src, 'feedHeader', { signal, onChunks });
          const native = handle.handle;
          if (!native.planned()) handle.call('finishHeader'); // the source ended inside the header
          ranges = [];
          for (let i = 0, n = native.rangeCount(); i < n; ++i) ranges.push([native.rangeBegin(i), native.rangeEnd(i)]);
          outputSize = native.outputSize();
          if (native.planned()) onPlan?.(native.summaryText());
          for (const bytes of head) emit(controller, bytes);
        } else {
          handle = new NativeHandle(module, new module.StreamConverter(target, -1), options.windowSize);
          if (!handle.handle.ok()) handle.call('ok');
        }
      } catch (error) {
        await fail(error);
      }
    },
    async pull(controller) {
      try {
        for (;;) {
          throwIfAborted(signal);
          if (ranges) {
            if (range >= ranges.length) return await done(controller);
            const [begin, end] = ranges[range];
            if (rangePos === 0) rangePos = begin;
            if (rangePos >= end) {
              range += 1;
              rangePos = 0;
              continue;
            }
            const n = Math.min(handle.windowSize, end - rangePos);
            const bytes = await raceAbort(src.read(rangePos, n), signal);
            if (bytes.length !== n)
              throw new SafetensorsError('IoError', `source ended at byte ${rangePos + bytes.length}, inside a tensor`, { offset: rangePos + bytes.length });
            rangePos += n;
            bytesRead += n;
            const wrote = handle.inputToBytes('push', bytes, (out) => emit(controller, out));
            progress();
            if (wrote) return;
          } else {
            const chunk = await src.next();
            if (chunk === null) return await done(controller);
            bytesRead += chunk.length;
            const wrote = handle.inputToBytes('feed', chunk, (out) => emit(controller, out));
            if (outputSize === null && handle.handle.headerDone()) {
              outputSize = handle.handle.outputSize();
              onPlan?.(handle.handle.summaryText());
            }
            progress();
            if (wrote) return;
          }
        }
      } catch (error) {
        await fail(error);
      }
    },
    async cancel(reason) {
      if (!finished) rejectSummary(reason ?? new Error('peft-bridge: conversion cancelled'));
      await cleanup(reason);
    },
  });
  return { readable, summary };
}

/**
 * Converts every F16, BF16, F32, F64, F8_E4M3 and F8_E5M2 tensor to `dtype` (round to nearest even), copies the
 * other tensors unchanged and keeps the metadata, as a ReadableStream of the new file.
 *
 * `order: 'reference'` (the default, as the CLI's, so the bytes are `peft-bridge convert`'s) writes Python
 * safetensors' order (dtype descending, then name) and needs a random-access source (Uint8Array, ArrayBuffer,
 * Blob, {size, read}, in Node a file path); `order: 'input'` keeps the source's tensor order and works on any
 * source, streams included (a stream without an explicit order is refused with InvalidArgument, never converted
 * in another order than asked). Invalid input errors the stream with SafetensorsError.
 *
 * @param {any} source
 * @param {{dtype: 'bf16' | 'f16' | 'f32', order?: 'reference' | 'input', signal?: AbortSignal, onProgress?: (p: {bytesRead: number, bytesWritten: number, inputSize: number | null, outputSize: number | null}) => void}} options
 * @returns {ReadableStream<Uint8Array>}
 */
export function convert(source, options) {
  return createConversion(source, options).readable;
}
