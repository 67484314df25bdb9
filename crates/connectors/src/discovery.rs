//! Network discovery (issue 34, SPEC 4.15 `POST /api/discover/scan`): probes the addresses a
//! caller names for industrial devices and says what answered.
//!
//! - Modbus TCP: a TCP connection to each port, then Read Device Identification (function 43 /
//!   MEI 14, basic objects) through tokio-modbus; a device that refuses the function with a
//!   Modbus exception is still a Modbus device (its identity says so).
//! - OPC UA: a TCP connection and the binary protocol's Hello; an Acknowledge is an OPC UA
//!   server (no session is opened).
//! - BACnet/IP: a unicast Who-Is (BVLC original-unicast-NPDU) to UDP 47808 of each address;
//!   the I-Am answers give the device instance, its maximum APDU and vendor id.
//! - EtherNet/IP: the encapsulation's List Identity (command 0x63) to UDP 44818 of each
//!   address; the answers give vendor, device type, product code, revision, serial number,
//!   product name and state.
//!
//! The two UDP requests are a few fixed bytes each and their answers are decoded here (as the
//! issue's stack notes say: raw UDP, no crate exists for either that fits).

use plantd_model::discovery::Protocol;
use serde_json::{Value, json};
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpStream, UdpSocket};
use tokio_modbus::client::Reader;

/// BACnet/IP's UDP port.
pub const BACNET_PORT: u16 = 47808;
/// EtherNet/IP's port (UDP for List Identity).
pub const ENIP_PORT: u16 = 44818;

/// Something that answered.
#[derive(Clone, Debug, PartialEq)]
pub struct Found {
    pub protocol: Protocol,
    pub host: IpAddr,
    pub port: u16,
    pub identity: Value,
}

/// A Modbus TCP device at `addr`, if one answers within `timeout`.
pub async fn modbus(addr: SocketAddr, timeout: Duration) -> Option<Found> {
    let stream = tokio::time::timeout(timeout, TcpStream::connect(addr))
        .await
        .ok()?
        .ok()?;
    let mut ctx = tokio_modbus::client::tcp::attach(stream);
    let answer = tokio::time::timeout(
        timeout,
        ctx.read_device_identification(tokio_modbus::prelude::ReadCode::Basic, 0),
    )
    .await
    .ok()?;
    let identity = match answer {
        Ok(Ok(r)) => {
            let mut id = serde_json::Map::new();
            for o in &r.device_id_objects {
                let name = match o.id {
                    0 => "vendor_name".to_string(),
                    1 => "product_code".to_string(),
                    2 => "revision".to_string(),
                    n => format!("object_{n}"),
                };
                id.insert(
                    name,
                    json!(String::from_utf8_lossy(&o.value).trim_end_matches('\0')),
                );
            }
            Value::Object(id)
        }
        // A Modbus exception: a Modbus device that does not identify itself.
        Ok(Err(e)) => json!({"device_identification": format!("not supported ({e})")}),
        // Not a Modbus answer (another service on the port).
        Err(_) => return None,
    };
    Some(Found {
        protocol: Protocol::Modbus,
        host: addr.ip(),
        port: addr.port(),
        identity,
    })
}

/// The OPC UA binary protocol's Hello for `url`.
fn opcua_hello(url: &str) -> Vec<u8> {
    let mut body = Vec::new();
    body.extend_from_slice(&0u32.to_le_bytes()); // protocol version
    body.extend_from_slice(&65_536u32.to_le_bytes()); // receive buffer
    body.extend_from_slice(&65_536u32.to_le_bytes()); // send buffer
    body.extend_from_slice(&0u32.to_le_bytes()); // max message size: no limit
    body.extend_from_slice(&0u32.to_le_bytes()); // max chunk count: no limit
    body.extend_from_slice(&(url.len() as i32).to_le_bytes());
    body.extend_from_slice(url.as_bytes());
    let mut msg = b"HELF".to_vec();
    msg.extend_from_slice(&((8 + body.len()) as u32).to_le_bytes());
    msg.extend_from_slice(&body);
    msg
}

/// An OPC UA server at `addr`, if it acknowledges a Hello within `timeout`.
pub async fn opcua(addr: SocketAddr, timeout: Duration) -> Option<Found> {
    let url = format!("opc.tcp://{addr}/");
    let exchange = async {
        let mut s = TcpStream::connect(addr).await.ok()?;
        s.write_all(&opcua_hello(&url)).await.ok()?;
        let mut head = [0u8; 8];
        s.read_exact(&mut head).await.ok()?;
        let (kind, len) = (&head[..4], u32::from_le_bytes(head[4..8].try_into().ok()?));
        match kind {
            b"ACKF" => Some(json!({"endpoint_url": url, "acknowledged": true})),
            // An error message is an OPC UA server refusing this Hello: still a server.
            b"ERRF" if len >= 12 => {
                let mut code = [0u8; 4];
                s.read_exact(&mut code).await.ok()?;
                Some(json!({"endpoint_url": url, "acknowledged": false,
                            "error": format!("0x{:08X}", u32::from_le_bytes(code))}))
            }
            _ => None,
        }
    };
    let identity = tokio::time::timeout(timeout, exchange).await.ok()??;
    Some(Found {
        protocol: Protocol::Opcua,
        host: addr.ip(),
        port: addr.port(),
        identity,
    })
}

/// BACnet/IP Who-Is, unconfirmed, no range, as an original-unicast-NPDU.
pub fn who_is() -> [u8; 8] {
    [0x81, 0x0a, 0x00, 0x08, 0x01, 0x00, 0x10, 0x08]
}

/// Reads a BACnet context-free application tag's unsigned value (`len` bytes).
fn unsigned(b: &[u8]) -> u64 {
    b.iter().fold(0u64, |acc, x| (acc << 8) | u64::from(*x))
}

/// An I-Am's identity: `{device_instance, max_apdu, segmentation, vendor_id}`.
pub fn parse_i_am(packet: &[u8]) -> Option<Value> {
    // BVLC: type 0x81, a function, the length.
    if packet.len() < 4 || packet[0] != 0x81 {
        return None;
    }
    let len = usize::from(u16::from_be_bytes([packet[2], packet[3]]));
    let npdu = packet.get(4..len.min(packet.len()))?;
    let bvlc_function = packet[1];
    // Forwarded-NPDU (0x04) carries the original source's 6 bytes first.
    let npdu = if bvlc_function == 0x04 {
        npdu.get(6..)?
    } else {
        npdu
    };
    // NPDU: version 1, control; skip destination/source specifiers when present.
    if npdu.len() < 2 || npdu[0] != 0x01 {
        return None;
    }
    let control = npdu[1];
    if control & 0x80 != 0 {
        return None; // a network layer message
    }
    let mut i = 2;
    if control & 0x20 != 0 {
        let dlen = usize::from(*npdu.get(i + 2)?);
        i += 3 + dlen;
    }
    if control & 0x08 != 0 {
        let slen = usize::from(*npdu.get(i + 2)?);
        i += 3 + slen;
    }
    if control & 0x20 != 0 {
        i += 1; // hop count
    }
    let apdu = npdu.get(i..)?;
    // Unconfirmed request (0x10), service I-Am (0x00).
    if apdu.len() < 2 || apdu[0] != 0x10 || apdu[1] != 0x00 {
        return None;
    }
    // Four application tags: object id (tag 12, 4 bytes), max APDU (unsigned), segmentation
    // (enumerated), vendor id (unsigned).
    let mut values = Vec::new();
    let mut j = 2;
    while values.len() < 4 {
        let tag = *apdu.get(j)?;
        let n = usize::from(tag & 0x07);
        let v = apdu.get(j + 1..j + 1 + n)?;
        values.push((tag >> 4, unsigned(v)));
        j += 1 + n;
    }
    if values[0].0 != 12 || values[0].1 >> 22 != 8 {
        return None; // not a device object
    }
    Some(json!({
        "device_instance": values[0].1 & 0x3f_ffff,
        "max_apdu": values[1].1,
        "segmentation": values[2].1,
        "vendor_id": values[3].1,
    }))
}

/// EtherNet/IP List Identity: the 24-byte encapsulation header, command 0x63, no data.
pub fn list_identity() -> [u8; 24] {
    let mut p = [0u8; 24];
    p[0] = 0x63;
    p[12..20].copy_from_slice(b"plantdsc");
    p
}

/// A List Identity answer's first identity item.
pub fn parse_list_identity(packet: &[u8]) -> Option<Value> {
    if packet.len() < 26 || u16::from_le_bytes([packet[0], packet[1]]) != 0x63 {
        return None;
    }
    let data = &packet[24..];
    let count = u16::from_le_bytes([data[0], data[1]]);
    if count == 0 {
        return None;
    }
    // Item: type 0x0C, length, then the identity.
    let item = data.get(2..)?;
    if item.get(..2)? != [0x0c, 0x00] {
        return None;
    }
    let id = item.get(4..)?;
    // Protocol version (2), socket address (16), vendor (2), device type (2), product code
    // (2), revision (2), status (2), serial (4), product name (short string), state (1).
    let u16_at =
        |k: usize| -> Option<u16> { Some(u16::from_le_bytes([*id.get(k)?, *id.get(k + 1)?])) };
    let vendor = u16_at(18)?;
    let device_type = u16_at(20)?;
    let product_code = u16_at(22)?;
    let revision = format!("{}.{}", id.get(24)?, id.get(25)?);
    let serial = u32::from_le_bytes(id.get(28..32)?.try_into().ok()?);
    let name_len = usize::from(*id.get(32)?);
    let name = String::from_utf8_lossy(id.get(33..33 + name_len)?).into_owned();
    let state = id.get(33 + name_len).copied();
    Some(json!({
        "vendor_id": vendor,
        "device_type": device_type,
        "product_code": product_code,
        "revision": revision,
        "serial_number": format!("{serial:08x}"),
        "product_name": name,
        "state": state,
    }))
}

/// The UDP probe of `protocol`: its port, its request and how its answer is read (none for
/// the TCP protocols).
type UdpProbe = (u16, Vec<u8>, fn(&[u8]) -> Option<Value>);

fn udp_probe_of(protocol: Protocol) -> Option<UdpProbe> {
    match protocol {
        Protocol::Bacnet => Some((BACNET_PORT, who_is().to_vec(), parse_i_am)),
        Protocol::EthernetIp => Some((ENIP_PORT, list_identity().to_vec(), parse_list_identity)),
        Protocol::Modbus | Protocol::Opcua => None,
    }
}

/// Sends `protocol`'s UDP request to every host from one UDP socket and decodes what comes
/// back within `wait`; one answer per address. Nothing for a TCP protocol.
pub async fn udp_probe(
    hosts: &[IpAddr],
    protocol: Protocol,
    wait: Duration,
) -> Result<Vec<Found>, String> {
    let Some((port, request, parse)) = udp_probe_of(protocol) else {
        return Ok(Vec::new());
    };
    let socket = UdpSocket::bind("0.0.0.0:0")
        .await
        .map_err(|e| format!("cannot open a UDP socket: {e}"))?;
    for h in hosts {
        // An address that cannot be reached is no answer, not a failure of the scan.
        let _ = socket.send_to(&request, SocketAddr::new(*h, port)).await;
    }
    let mut found: Vec<Found> = Vec::new();
    let mut buf = vec![0u8; 1500];
    let deadline = tokio::time::Instant::now() + wait;
    while let Ok(Ok((n, from))) =
        tokio::time::timeout_at(deadline, socket.recv_from(&mut buf)).await
    {
        if !hosts.contains(&from.ip()) || found.iter().any(|f| f.host == from.ip()) {
            continue;
        }
        if let Some(identity) = parse(&buf[..n]) {
            found.push(Found {
                protocol,
                host: from.ip(),
                port,
                identity,
            });
        }
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_i_am_and_a_list_identity_answer_are_read() {
        // bacpypes3's I-Am of device 599, vendor 999.
        let i_am = hex("810a001501001000c40200025722040091002203e7");
        assert_eq!(
            parse_i_am(&i_am).unwrap(),
            json!({"device_instance": 599, "max_apdu": 1024, "segmentation": 0, "vendor_id": 999})
        );
        assert_eq!(parse_i_am(&who_is()), None);
        assert_eq!(parse_i_am(&[0x81]), None);
        // cpppo's List Identity answer (its default 1756-L61 identity).
        let mut answer = vec![0x63, 0, 0x3c, 0];
        answer.extend_from_slice(&[0; 8]);
        answer.extend_from_slice(b"plantdsc");
        answer.extend_from_slice(&[0; 4]);
        answer.extend_from_slice(&[1, 0, 0x0c, 0, 0x36, 0, 1, 0]);
        answer.extend_from_slice(&[0; 16]);
        answer.extend_from_slice(&[0x01, 0x00, 0x0e, 0x00, 0x36, 0x00, 0x14, 0x0b]);
        answer.extend_from_slice(&[0x60, 0x31, 0x1a, 0x06, 0x6c, 0x00, 0x14]);
        answer.extend_from_slice(b"1756-L61/B LOGIX5561");
        answer.push(0xff);
        let id = parse_list_identity(&answer).unwrap();
        assert_eq!(id["vendor_id"], 1);
        assert_eq!(id["device_type"], 14);
        assert_eq!(id["product_code"], 54);
        assert_eq!(id["revision"], "20.11");
        assert_eq!(id["serial_number"], "006c061a");
        assert_eq!(id["product_name"], "1756-L61/B LOGIX5561");
        assert_eq!(id["state"], 255);
        assert_eq!(parse_list_identity(&list_identity()), None);
        // Cut short anywhere, an answer is no answer (never a panic).
        for n in 0..answer.len() - 1 {
            assert_eq!(parse_list_identity(&answer[..n]), None, "{n}");
        }
        for n in 0..i_am.len() {
            assert_eq!(parse_i_am(&i_am[..n]), None, "{n}");
        }
        let hello = opcua_hello("opc.tcp://h:4840/");
        assert_eq!(&hello[..4], b"HELF");
        assert_eq!(
            u32::from_le_bytes(hello[4..8].try_into().unwrap()) as usize,
            hello.len()
        );
    }

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }
}
