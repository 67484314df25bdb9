//! Modbus TCP polling: the register map is read every `poll_interval_ms` in as few requests as
//! it allows (neighbouring registers of one kind share a request), decoded (u16/i16/u32/i32/f32
//! with word order), scaled (`raw * scale + offset`) and handed over as points stamped with the
//! time of the poll.
//!
//! A Modbus exception carries no value, so it yields no point: a request that a whole batch
//! caused is retried one register mapping at a time (once per session) so that one bad address
//! costs only its own tag, and the tags that still fail are named in the source's error.

use plantd_model::Timestamp;
use plantd_model::data_source::{ModbusConfig, RegisterKind, RegisterMap, RegisterType, WordOrder};
use plantd_model::telemetry::Quality;
use std::time::Duration;
use tokio_modbus::client::{Context, Reader};
use tokio_modbus::{ExceptionCode, Slave};

use crate::net::{dial, host_port};
use crate::sink::Sink;

/// Registers one read request may cover (Modbus allows 125).
const MAX_WORDS: u16 = 125;
/// Coils or discrete inputs one read request may cover (Modbus allows 2000).
const MAX_BITS: u16 = 2000;
/// Unmapped registers a request may read through to join two mapped ones.
const MAX_GAP_WORDS: u16 = 8;
const MAX_GAP_BITS: u16 = 64;

/// One read request and the mappings it serves.
#[derive(Clone, Debug, PartialEq)]
pub struct Read {
    pub kind: RegisterKind,
    pub start: u16,
    pub count: u16,
    /// Indices into the register map.
    pub tags: Vec<usize>,
}

/// Groups the map into requests: per kind, by address, joining neighbours while the request
/// stays within the protocol's size and reads at most a few unmapped registers in between.
pub fn plan(map: &[RegisterMap]) -> Vec<Read> {
    let mut order: Vec<usize> = (0..map.len()).collect();
    order.sort_by_key(|&i| (map[i].kind, map[i].address));
    let mut reads: Vec<Read> = Vec::new();
    for i in order {
        let r = &map[i];
        let bits = matches!(r.kind, RegisterKind::Coil | RegisterKind::Discrete);
        let width = if bits { 1 } else { r.data_type.width() };
        let (max, gap) = if bits {
            (MAX_BITS, MAX_GAP_BITS)
        } else {
            (MAX_WORDS, MAX_GAP_WORDS)
        };
        let end = u32::from(r.address) + u32::from(width);
        if let Some(last) = reads.last_mut()
            && last.kind == r.kind
        {
            let last_end = u32::from(last.start) + u32::from(last.count);
            let joins = u32::from(r.address) <= last_end + u32::from(gap)
                && end - u32::from(last.start) <= u32::from(max);
            if joins {
                last.count = (end.max(last_end) - u32::from(last.start)) as u16;
                last.tags.push(i);
                continue;
            }
        }
        reads.push(Read {
            kind: r.kind,
            start: r.address,
            count: width,
            tags: vec![i],
        });
    }
    reads
}

/// The value of mapping `r` in words read from `start`.
pub fn decode_words(r: &RegisterMap, words: &[u16], start: u16) -> Option<f64> {
    let at = usize::from(r.address - start);
    let w0 = *words.get(at)?;
    let pair = || -> Option<u32> {
        let w1 = *words.get(at + 1)?;
        Some(match r.word_order {
            WordOrder::Big => (u32::from(w0) << 16) | u32::from(w1),
            WordOrder::Little => (u32::from(w1) << 16) | u32::from(w0),
        })
    };
    let raw = match r.data_type {
        RegisterType::U16 => f64::from(w0),
        RegisterType::I16 => f64::from(w0 as i16),
        RegisterType::U32 => f64::from(pair()?),
        RegisterType::I32 => f64::from(pair()? as i32),
        RegisterType::F32 => f64::from(f32::from_bits(pair()?)),
        RegisterType::Bool => f64::from(u8::from(w0 != 0)),
    };
    Some(raw * r.scale + r.offset)
}

/// What one request returned.
enum Answer {
    Words(Vec<u16>),
    Bits(Vec<bool>),
}

async fn read(ctx: &mut Context, kind: RegisterKind, start: u16, count: u16) -> ReadResult {
    let r = match kind {
        RegisterKind::Holding => ctx
            .read_holding_registers(start, count)
            .await
            .map(|r| r.map(Answer::Words)),
        RegisterKind::Input => ctx
            .read_input_registers(start, count)
            .await
            .map(|r| r.map(Answer::Words)),
        RegisterKind::Coil => ctx
            .read_coils(start, count)
            .await
            .map(|r| r.map(Answer::Bits)),
        RegisterKind::Discrete => ctx
            .read_discrete_inputs(start, count)
            .await
            .map(|r| r.map(Answer::Bits)),
    };
    match r {
        Ok(Ok(a)) => ReadResult::Ok(a),
        Ok(Err(code)) => ReadResult::Exception(code),
        Err(tokio_modbus::Error::Transport(e)) => ReadResult::Failed(match e.kind() {
            std::io::ErrorKind::TimedOut => "timed out".into(),
            std::io::ErrorKind::HostUnreachable | std::io::ErrorKind::NetworkUnreachable => {
                format!("became unreachable ({e})")
            }
            // The client reports the end of the stream with a stale OS error; every other
            // transport failure also means the connection is gone.
            _ => "closed the connection".into(),
        }),
        Err(e) => ReadResult::Failed(format!("sent a response that is not valid Modbus ({e})")),
    }
}

enum ReadResult {
    Ok(Answer),
    Exception(ExceptionCode),
    /// The connection or the framing failed (what the device did): the session is over.
    Failed(String),
}

pub fn describe_exception(code: ExceptionCode) -> String {
    match code {
        ExceptionCode::IllegalFunction => {
            "illegal function (the device does not serve this register kind)".into()
        }
        ExceptionCode::IllegalDataAddress => {
            "illegal data address (no such register on the device)".into()
        }
        ExceptionCode::IllegalDataValue => "illegal data value".into(),
        ExceptionCode::ServerDeviceFailure => "server device failure".into(),
        ExceptionCode::ServerDeviceBusy => "server device busy".into(),
        ExceptionCode::GatewayPathUnavailable => "gateway path unavailable".into(),
        ExceptionCode::GatewayTargetDevice => "gateway target device failed to respond".into(),
        other => format!("exception {:#04x}", u8::from(other)),
    }
}

fn kind_name(kind: RegisterKind) -> &'static str {
    match kind {
        RegisterKind::Holding => "holding register",
        RegisterKind::Input => "input register",
        RegisterKind::Coil => "coil",
        RegisterKind::Discrete => "discrete input",
    }
}

pub(crate) fn asset_of<'a>(c: &'a ModbusConfig, r: &'a RegisterMap) -> &'a str {
    r.asset_id
        .as_deref()
        .or(c.asset_id.as_deref())
        .unwrap_or_default()
}

async fn connect(c: &ModbusConfig) -> Result<Context, String> {
    let stream = dial(&c.host, c.port, Duration::from_millis(c.timeout_ms)).await?;
    Ok(tokio_modbus::client::tcp::attach_slave(
        stream,
        Slave(c.unit_id),
    ))
}

/// One connection: poll until the connection fails.
pub async fn session(c: &ModbusConfig, sink: &Sink) -> Result<(), String> {
    let addr = host_port(&c.host, c.port);
    let mut ctx = connect(c).await?;
    let mut reads = plan(&c.registers);
    // Connected once the device has answered (a TCP connection alone may be a proxy or another
    // service); with nothing mapped, the connection is all there is to check.
    let mut answered = false;
    if reads.is_empty() {
        sink.connected(0);
        answered = true;
    }
    let timeout = Duration::from_millis(c.timeout_ms);
    let mut ticker = tokio::time::interval(Duration::from_millis(c.poll_interval_ms));
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticker.tick().await;
        if reads.is_empty() {
            continue;
        }
        let now = Timestamp::now();
        let mut points = Vec::with_capacity(c.registers.len());
        let mut problems: Vec<String> = Vec::new();
        let mut split: Vec<usize> = Vec::new();
        for (n, rd) in reads.iter().enumerate() {
            let answer = tokio::time::timeout(timeout, read(&mut ctx, rd.kind, rd.start, rd.count))
                .await
                .map_err(|_| {
                    format!(
                        "{addr} did not answer a read of {} {} within {} ms",
                        kind_name(rd.kind),
                        rd.start,
                        c.timeout_ms
                    )
                })?;
            match answer {
                ReadResult::Ok(Answer::Words(words)) => {
                    for &i in &rd.tags {
                        let r = &c.registers[i];
                        if let Some(v) = decode_words(r, &words, rd.start) {
                            points.push(sink.point(
                                asset_of(c, r),
                                &r.tag_name,
                                v,
                                now,
                                Quality::Good,
                            ));
                        }
                    }
                }
                ReadResult::Ok(Answer::Bits(bits)) => {
                    for &i in &rd.tags {
                        let r = &c.registers[i];
                        if let Some(&b) = bits.get(usize::from(r.address - rd.start)) {
                            let v = f64::from(u8::from(b)) * r.scale + r.offset;
                            points.push(sink.point(
                                asset_of(c, r),
                                &r.tag_name,
                                v,
                                now,
                                Quality::Good,
                            ));
                        }
                    }
                }
                ReadResult::Exception(code) if rd.tags.len() > 1 => {
                    // One bad address spoils the batch: read its mappings one by one from now on.
                    tracing::debug!(?code, start = rd.start, "batch refused; splitting");
                    split.push(n);
                }
                ReadResult::Exception(code) => {
                    let r = &c.registers[rd.tags[0]];
                    problems.push(format!(
                        "{}/{} ({} {}): {}",
                        asset_of(c, r),
                        r.tag_name,
                        kind_name(r.kind),
                        r.address,
                        describe_exception(code)
                    ));
                }
                ReadResult::Failed(e) => return Err(format!("{addr} {e}")),
            }
        }
        if !split.is_empty() {
            let mut next = Vec::with_capacity(reads.len());
            for (n, rd) in reads.into_iter().enumerate() {
                if split.contains(&n) {
                    next.extend(rd.tags.iter().map(|&i| {
                        let r = &c.registers[i];
                        let width = match r.kind {
                            RegisterKind::Coil | RegisterKind::Discrete => 1,
                            _ => r.data_type.width(),
                        };
                        Read {
                            kind: r.kind,
                            start: r.address,
                            count: width,
                            tags: vec![i],
                        }
                    }));
                } else {
                    next.push(rd);
                }
            }
            reads = next;
            // Read the split mappings at once rather than a poll later.
            ticker.reset_immediately();
        }
        if !answered {
            sink.connected(c.registers.len());
            answered = true;
        }
        sink.push(points);
        sink.problem(summarize(&problems));
    }
}

fn summarize(problems: &[String]) -> Option<String> {
    match problems {
        [] => None,
        [one] => Some(one.clone()),
        [first, rest @ ..] => Some(format!("{first} (and {} more tags)", rest.len())),
    }
}

/// Connects and reads the first mapped register (or only connects when nothing is mapped).
pub async fn probe(c: &ModbusConfig) -> Result<String, String> {
    let addr = host_port(&c.host, c.port);
    let mut ctx = connect(c).await?;
    let Some(first) = c.registers.first() else {
        let _ = tokio_modbus::client::Client::disconnect(&mut ctx).await;
        return Ok(format!(
            "TCP connection to {addr} established; no registers are mapped yet, so none was read"
        ));
    };
    let width = match first.kind {
        RegisterKind::Coil | RegisterKind::Discrete => 1,
        _ => first.data_type.width(),
    };
    let what = format!(
        "{} {} of unit {}",
        kind_name(first.kind),
        first.address,
        c.unit_id
    );
    let answer = tokio::time::timeout(
        Duration::from_millis(c.timeout_ms),
        read(&mut ctx, first.kind, first.address, width),
    )
    .await
    .map_err(|_| {
        format!(
            "{addr} accepted the connection but did not answer a read of {what} within {} ms",
            c.timeout_ms
        )
    })?;
    let _ = tokio_modbus::client::Client::disconnect(&mut ctx).await;
    match answer {
        ReadResult::Ok(Answer::Words(words)) => {
            let v = decode_words(first, &words, first.address).unwrap_or(f64::NAN);
            Ok(format!("read {what} ({}): {v}", first.tag_name))
        }
        ReadResult::Ok(Answer::Bits(bits)) => Ok(format!(
            "read {what} ({}): {}",
            first.tag_name,
            bits.first().copied().unwrap_or_default()
        )),
        ReadResult::Exception(code) => Err(format!(
            "{addr} answered the read of {what} with {}",
            describe_exception(code)
        )),
        ReadResult::Failed(e) => Err(format!("{addr} {e} on the read of {what}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(kind: RegisterKind, address: u16, data_type: RegisterType) -> RegisterMap {
        RegisterMap {
            tag_name: format!("t{address}"),
            asset_id: Some("a".into()),
            kind,
            address,
            data_type,
            word_order: WordOrder::Big,
            scale: 1.0,
            offset: 0.0,
        }
    }

    #[test]
    fn neighbours_share_a_request_and_kinds_do_not() {
        use RegisterKind::*;
        use RegisterType::*;
        let m = vec![
            map(Holding, 10, F32),
            map(Holding, 0, U16),
            map(Holding, 2, F32),
            map(Input, 0, U16),
            map(Holding, 200, U16),
            map(Coil, 5, Bool),
            map(Coil, 0, Bool),
        ];
        let p = plan(&m);
        assert_eq!(
            p.iter()
                .map(|r| (r.kind, r.start, r.count))
                .collect::<Vec<_>>(),
            vec![
                (Holding, 0, 12),
                (Holding, 200, 1),
                (Input, 0, 1),
                (Coil, 0, 6),
            ]
        );
        assert_eq!(p[0].tags, vec![1, 2, 0]);
    }

    #[test]
    fn a_request_stays_within_125_registers() {
        let m: Vec<_> = (0..200)
            .map(|i| map(RegisterKind::Holding, i * 2, RegisterType::F32))
            .collect();
        let p = plan(&m);
        assert!(p.iter().all(|r| r.count <= 125), "{p:?}");
        assert_eq!(p.iter().map(|r| r.tags.len()).sum::<usize>(), 200);
        assert_eq!(p.len(), 4);
    }

    #[test]
    fn decoding_types_orders_and_scaling() {
        let mut r = map(RegisterKind::Holding, 4, RegisterType::F32);
        let bits = 12.5f32.to_bits();
        let words = [0, 0, 0, 0, (bits >> 16) as u16, bits as u16];
        assert_eq!(decode_words(&r, &words, 0), Some(12.5));
        r.word_order = WordOrder::Little;
        let swapped = [bits as u16, (bits >> 16) as u16];
        assert_eq!(decode_words(&r, &swapped, 4), Some(12.5));
        let mut r = map(RegisterKind::Holding, 0, RegisterType::I16);
        r.scale = 0.1;
        r.offset = 1.0;
        assert!((decode_words(&r, &[0xFFF6], 0).unwrap() - 0.0).abs() < 1e-9);
        let r = map(RegisterKind::Holding, 0, RegisterType::I32);
        assert_eq!(decode_words(&r, &[0xFFFF, 0xFFFE], 0), Some(-2.0));
        let r = map(RegisterKind::Holding, 0, RegisterType::U32);
        assert_eq!(decode_words(&r, &[0x0001, 0x0000], 0), Some(65536.0));
        assert_eq!(decode_words(&r, &[0x0001], 0), None, "a value cut short");
    }
}
