// convert(): dtype conversion of a whole file, streamed. The sequence is the core's convert job (app/convert_job.h),
// run by the job driver (job-driver.js) into a ReadableStream: input order works on any source, reference order
// needs random access.
import { SafetensorsError, abortReason } from '../errors.js';
import { openJob, run } from '../job-driver.js';
import { openSource } from '../io/sources.js';

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
  const { signal, onProgress } = options ?? {};
  if (typeof options?.dtype !== 'string')
    throw new TypeError("peft-bridge: convert needs {dtype: 'bf16' | 'f16' | 'f32'}");
  // The CLI's default, so that convert(file) writes the bytes `peft-bridge convert` writes.
  const order = options.order ?? 'reference';
  if (order !== 'input' && order !== 'reference')
    throw new TypeError("peft-bridge: order must be 'reference' or 'input'");

  // The run stops on the caller's abort and on the stream's cancel alike.
  const stop = new AbortController();
  const onAbort = () => {
    stop.abort(abortReason(signal));
    wake?.();
  };
  let controller;
  let wake = null; // resolves a write waiting for the reader to want more
  let running = null;
  let bytesWritten = 0;
  const sink = {
    async write(_output, at, bytes, forwarded) {
      if (at !== bytesWritten)
        throw new SafetensorsError(
          'InvalidArgument',
          `a stream takes bytes in order (byte ${at} after ${bytesWritten})`,
        );
      bytesWritten += bytes.length;
      // Forwarded bytes may be a view of the caller's input: the stream hands on a copy.
      controller.enqueue(forwarded ? bytes.slice() : bytes);
      if (controller.desiredSize <= 0 && !stop.signal.aborted) await new Promise((resolve) => (wake = resolve));
    },
  };
  const go = async () => {
    let src = null;
    let job = null;
    try {
      if (signal?.aborted) throw abortReason(signal);
      signal?.addEventListener('abort', onAbort, { once: true });
      src = await openSource(source, { readSize: options.readSize, signal: stop.signal });
      if (order === 'reference' && !src.random)
        throw new SafetensorsError(
          'InvalidArgument',
          `reference order${options.order === undefined ? " (the default, the CLI's)" : ''} needs a random-access source (Uint8Array, ArrayBuffer, Blob, {size, read} or in Node a file path); pass order: "input" for a stream`,
        );
      const inputSize = src.size ?? null;
      const jobOptions = { dtype: options.dtype, order, inputSize };
      job = await openJob('convert', jobOptions, { windowSize: options.windowSize });
      const size = () => (job.handle.outputSize() >= 0 ? job.handle.outputSize() : null);
      const progress = (done) => onProgress?.({ bytesRead: done, bytesWritten, inputSize, outputSize: size() });
      let bytesRead = 0;
      await run(job, [src], sink, { signal: stop.signal, onProgress: ({ done }) => progress((bytesRead = done)) });
      progress(bytesRead);
      controller.close();
      await src.close();
    } catch (error) {
      try {
        controller.error(error);
      } catch {
        // already errored or closed
      }
      await src?.close(error);
    } finally {
      signal?.removeEventListener('abort', onAbort);
      job?.close();
    }
  };
  return new ReadableStream({
    start(c) {
      controller = c;
    },
    pull() {
      running ??= go();
      const w = wake;
      wake = null;
      w?.();
    },
    async cancel(reason) {
      stop.abort(reason ?? new Error('peft-bridge: conversion cancelled'));
      const w = wake;
      wake = null;
      w?.();
      await running;
    },
  });
}
