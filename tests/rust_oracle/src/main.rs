//! The Rust `safetensors` crate as the judge of our reader (tests/rust_oracle/README.md).
//!
//!   pb-rust-oracle files PATH...       verdict of every file (directories are walked), "<verdict>\t<path>"
//!   pb-rust-oracle fill VECTORS        fills the crate's columns of a vectors file (format below), to stdout
//!   pb-rust-oracle bench FILE [N]      parses FILE N times; best and mean time, peak RSS
//!
//! A verdict is `ok` or the name of the `SafeTensorError` variant, from `SafeTensors::deserialize`
//! (checked to agree with `SafeTensors::read_metadata`, which it wraps).
//!
//! Vectors file: one vector per line, tab-separated, `#` lines are comments:
//!   id  crate  digest  ours  reason  size:crc32  label  encoding
//! `fill` replaces `crate` and `digest` (the digest of what the crate parsed, for accepted files) and
//! checks `size:crc32` against the decoded bytes; the other columns are copied.
//! Encoding: space-separated tokens; `@<decimal>` is a u64 little-endian; any other token is
//! percent-encoded bytes (`%XX`), optionally followed by `*<count>` to repeat them.
use safetensors::tensor::Metadata;
use safetensors::{SafeTensorError, SafeTensors};
use std::io::{BufRead, Write};
use std::time::Instant;

fn variant_name(e: &SafeTensorError) -> String {
    // The Debug form starts with the variant's name; cut at its payload.
    let debug = format!("{e:?}");
    debug.split(|c: char| c == '(' || c == ' ' || c == '{').next().unwrap_or("").to_string()
}

fn verdict_once(bytes: &[u8]) -> (String, Option<Metadata>) {
    match SafeTensors::read_metadata(bytes) {
        Ok((_, metadata)) => ("ok".to_string(), Some(metadata)),
        Err(e) => (variant_name(&e), None),
    }
}

/// The crate's verdict, or verdicts: it sorts tensors by (begin, end) only, so tensors with equal offsets
/// are validated in its HashMap's order, seeded at random per map, and the first failure can differ
/// between runs. Several runs collect every outcome ("A|B", sorted); our reader must give one of them.
/// The digest is of an accepted parse (the same in every accepting run: it does not depend on order).
fn verdict(bytes: &[u8]) -> (String, Option<String>) {
    fn record(
        (v, metadata): (String, Option<Metadata>),
        seen: &mut std::collections::BTreeSet<String>,
        accepted: &mut Option<String>,
    ) {
        if let Some(m) = metadata {
            accepted.get_or_insert_with(|| digest(&m));
        }
        seen.insert(v);
    }
    let mut seen = std::collections::BTreeSet::new();
    let mut accepted = None;
    record(verdict_once(bytes), &mut seen, &mut accepted);
    // deserialize() is read_metadata() plus a slice; check it says the same.
    let via_deserialize =
        SafeTensors::deserialize(bytes).map(|_| "ok".to_string()).unwrap_or_else(|e| variant_name(&e));
    record((via_deserialize, None), &mut seen, &mut accepted);
    let runs = if bytes.len() > 1 << 20 { 4 } else { 32 };
    for _ in 0..runs {
        record(verdict_once(bytes), &mut seen, &mut accepted);
    }
    if seen.len() > 1 {
        for _ in 0..2000 {
            record(verdict_once(bytes), &mut seen, &mut accepted);
        }
    }
    (seen.into_iter().collect::<Vec<_>>().join("|"), accepted)
}

fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf29ce484222325;
    for &b in bytes {
        h ^= b as u64;
        h = h.wrapping_mul(0x100000001b3);
    }
    h
}

/// CRC-32 (IEEE, zlib's): checks that a vector's encoding decodes to the bytes the generator made.
fn crc32(bytes: &[u8]) -> u32 {
    let mut table = [0u32; 256];
    for (i, slot) in table.iter_mut().enumerate() {
        let mut c = i as u32;
        for _ in 0..8 {
            c = if c & 1 != 0 { 0xEDB88320 ^ (c >> 1) } else { c >> 1 };
        }
        *slot = c;
    }
    let mut c = !0u32;
    for &b in bytes {
        c = table[((c ^ b as u32) & 0xFF) as usize] ^ (c >> 8);
    }
    !c
}

/// What the crate parsed, in a canonical text the C++ and JS tests rebuild from our reader's header:
/// tensors sorted by name bytes, "name\0dtype\0d1,d2\0begin,end\n"; then, if `__metadata__` is present
/// and not null, "\x01" and its entries sorted by key, "key\0value\n". The digest is its FNV-1a 64.
fn digest(metadata: &Metadata) -> String {
    let mut tensors: Vec<_> = metadata.tensors().into_iter().collect();
    tensors.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    let mut text: Vec<u8> = Vec::new();
    for (name, info) in tensors {
        let dims: Vec<String> = info.shape.iter().map(|d| d.to_string()).collect();
        text.extend_from_slice(name.as_bytes());
        text.push(0);
        text.extend_from_slice(format!("{:?}", info.dtype).as_bytes());
        text.push(0);
        text.extend_from_slice(dims.join(",").as_bytes());
        text.push(0);
        text.extend_from_slice(format!("{},{}\n", info.data_offsets.0, info.data_offsets.1).as_bytes());
    }
    if let Some(map) = metadata.metadata() {
        text.push(1);
        let mut entries: Vec<_> = map.iter().collect();
        entries.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
        for (k, v) in entries {
            text.extend_from_slice(k.as_bytes());
            text.push(0);
            text.extend_from_slice(v.as_bytes());
            text.push(b'\n');
        }
    }
    format!("{:016x}", fnv1a64(&text))
}

fn hex_digit(c: u8) -> u8 {
    match c {
        b'0'..=b'9' => c - b'0',
        b'a'..=b'f' => c - b'a' + 10,
        b'A'..=b'F' => c - b'A' + 10,
        _ => panic!("bad hex digit {c}"),
    }
}

fn decode(encoding: &str) -> Vec<u8> {
    let mut out = Vec::new();
    for token in encoding.split(' ').filter(|t| !t.is_empty()) {
        if let Some(n) = token.strip_prefix('@') {
            out.extend_from_slice(&n.parse::<u64>().expect("bad @ token").to_le_bytes());
            continue;
        }
        let (text, count) = match token.rfind('*') {
            Some(star) => (&token[..star], token[star + 1..].parse::<usize>().expect("bad repeat count")),
            None => (token, 1),
        };
        let raw = text.as_bytes();
        let mut piece = Vec::with_capacity(raw.len());
        let mut i = 0;
        while i < raw.len() {
            if raw[i] == b'%' {
                piece.push(hex_digit(raw[i + 1]) << 4 | hex_digit(raw[i + 2]));
                i += 3;
            } else {
                piece.push(raw[i]);
                i += 1;
            }
        }
        for _ in 0..count {
            out.extend_from_slice(&piece);
        }
    }
    out
}

fn fill(path: &str) {
    let file = std::fs::File::open(path).expect("cannot open the vectors file");
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    for line in std::io::BufReader::new(file).lines() {
        let line = line.expect("unreadable line");
        if line.starts_with('#') || line.is_empty() {
            writeln!(out, "{line}").unwrap();
            continue;
        }
        let mut cols: Vec<String> = line.split('\t').map(str::to_string).collect();
        assert_eq!(cols.len(), 8, "vector line needs 8 columns: {line}");
        let bytes = decode(&cols[7]);
        let check = format!("{}:{:08x}", bytes.len(), crc32(&bytes));
        assert_eq!(cols[5], check, "vector {} does not decode to its recorded size:crc32", cols[0]);
        let (v, accepted) = verdict(&bytes);
        cols[2] = accepted.unwrap_or_else(|| "-".to_string());
        cols[1] = v;
        writeln!(out, "{}", cols.join("\t")).unwrap();
    }
}

fn files(paths: &[String]) {
    let mut all = Vec::new();
    for p in paths {
        collect(std::path::Path::new(p), &mut all);
    }
    all.sort();
    for p in all {
        let bytes = std::fs::read(&p).expect("cannot read file");
        println!("{}\t{}", verdict(&bytes).0, p.display());
    }
}

fn collect(p: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
    if p.is_dir() {
        for e in std::fs::read_dir(p).expect("cannot list directory") {
            collect(&e.expect("bad entry").path(), out);
        }
    } else {
        out.push(p.to_path_buf());
    }
}

/// A field of /proc/self/status (VmRSS, VmHWM), in KiB.
fn status_kib(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field).and_then(|v| v.strip_prefix(':')))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// The method of bench/header_peak.cc, so the two peaks compare: the file is read into memory first (it
/// is the baseline, as a mapped file would be), the high-water mark is reset (Linux >= 4.0), and the peak
/// is VmHWM after the first parse minus VmRSS before it.
fn bench(path: &str, iterations: usize) {
    let bytes = std::fs::read(path).expect("cannot read file");
    let reset = std::fs::write("/proc/self/clear_refs", "5").is_ok();
    let rss_before = status_kib("VmRSS");
    let mut times = Vec::new();
    let mut tensors = 0;
    let mut hwm_after_first = 0;
    for _ in 0..iterations.max(1) {
        let start = Instant::now();
        let parsed = SafeTensors::deserialize(&bytes).expect("bench file must be valid");
        tensors = parsed.len();
        drop(parsed);
        times.push(start.elapsed().as_secs_f64());
        if hwm_after_first == 0 {
            hwm_after_first = status_kib("VmHWM");
        }
    }
    times.sort_by(|a, b| a.partial_cmp(b).unwrap());
    println!("parser             Rust safetensors 0.8.0, SafeTensors::deserialize (whole file in memory)");
    println!("file               {path} ({:.1} MB, {tensors} tensors)", bytes.len() as f64 / 1e6);
    println!(
        "time min/median/max  {:.3} / {:.3} / {:.3} s  ({} runs)",
        times[0],
        times[times.len() / 2],
        times[times.len() - 1],
        times.len()
    );
    println!("RSS before         {:.1} MiB (the file's bytes included)", rss_before as f64 / 1024.0);
    println!(
        "peak RSS delta     {:.1} MiB  (VmHWM {:.1} MiB after first parse; HWM reset {})",
        hwm_after_first.saturating_sub(rss_before) as f64 / 1024.0,
        hwm_after_first as f64 / 1024.0,
        if reset { "ok" } else { "FAILED: delta includes the file read" }
    );
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    match args.get(1).map(String::as_str) {
        Some("files") if args.len() > 2 => files(&args[2..]),
        Some("fill") if args.len() == 3 => fill(&args[2]),
        Some("bench") if args.len() >= 3 => {
            bench(&args[2], args.get(3).map(|n| n.parse().expect("N")).unwrap_or(10))
        }
        _ => {
            eprintln!("usage: pb-rust-oracle files PATH... | fill VECTORS | bench FILE [N]");
            std::process::exit(2);
        }
    }
}
