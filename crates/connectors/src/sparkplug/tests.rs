//! Sparkplug B decoding: the generated code is current; births, aliases, sequence gaps,
//! unknown aliases, deaths and integer widths.

use super::*;
use crate::sparkplug_proto::payload::Metric;

const HEADER: &str = "//! Generated from `proto/sparkplug_b.proto` (Eclipse Tahu, EPL-2.0) by prost-build with protox;\n//! `sparkplug::tests::generated_code_is_current` regenerates it and fails when it differs.\n";

/// Regenerates `src/sparkplug_proto.rs` (with `PLANTD_REGENERATE=1` it writes it).
#[test]
fn generated_code_is_current() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let fds =
        protox::compile(["sparkplug_b.proto"], [root.join("proto")]).expect("the proto compiles");
    let out = std::env::temp_dir().join(format!("plantd-sparkplug-{}", std::process::id()));
    std::fs::create_dir_all(&out).unwrap();
    prost_build::Config::new()
        .out_dir(&out)
        .compile_fds(fds)
        .expect("prost-build generates");
    let generated = std::fs::read_to_string(out.join("org.eclipse.tahu.protobuf.rs")).unwrap();
    let _ = std::fs::remove_dir_all(&out);
    let want = format!("{HEADER}{generated}");
    let path = root.join("src/sparkplug_proto.rs");
    if std::env::var("PLANTD_REGENERATE").is_ok() {
        std::fs::write(&path, &want).unwrap();
    }
    let have = std::fs::read_to_string(&path).unwrap();
    assert!(
        have == want,
        "src/sparkplug_proto.rs is not current: run with PLANTD_REGENERATE=1"
    );
}

fn metric(
    name: Option<&str>,
    alias: Option<u64>,
    datatype: Option<DataType>,
    value: metric::Value,
) -> Metric {
    Metric {
        name: name.map(String::from),
        alias,
        datatype: datatype.map(|d| d as u32),
        value: Some(value),
        ..Default::default()
    }
}

fn payload(seq: u64, metrics: Vec<Metric>) -> Vec<u8> {
    Payload {
        timestamp: Some(1_700_000_000_000),
        seq: Some(seq),
        metrics,
        ..Default::default()
    }
    .encode_to_vec()
}

fn values(d: &Decoded) -> Vec<(String, String, f64, Quality)> {
    let mut v: Vec<_> = d
        .points
        .iter()
        .map(|p| (p.asset_id.clone(), p.tag_name.clone(), p.value, p.quality))
        .collect();
    v.sort_by(|a, b| a.1.cmp(&b.1).then(a.0.cmp(&b.0)));
    v
}

#[test]
fn births_data_aliases_and_deaths() {
    let now = Timestamp::from_millis(1_700_000_001_000);
    let mut d = Decoder::default();
    // Data before any birth: rebirth.
    let early = d
        .decode("spBv1.0/plant/NDATA/edge1", &payload(0, vec![]), now)
        .unwrap();
    assert_eq!(
        early.rebirth.as_ref().map(|r| r.2.as_str()),
        Some("data from a node without a birth")
    );
    let birth = payload(
        0,
        vec![
            metric(
                Some("bdSeq"),
                None,
                Some(DataType::UInt64),
                metric::Value::LongValue(3),
            ),
            metric(
                Some("Node Control/Rebirth"),
                None,
                Some(DataType::Boolean),
                metric::Value::BooleanValue(false),
            ),
            metric(
                Some("Temperature"),
                Some(1),
                Some(DataType::Double),
                metric::Value::DoubleValue(21.5),
            ),
            metric(
                Some("Running"),
                Some(2),
                Some(DataType::Boolean),
                metric::Value::BooleanValue(true),
            ),
            metric(
                Some("Offset"),
                Some(3),
                Some(DataType::Int16),
                metric::Value::IntValue(0xFFFF_FFFE),
            ),
        ],
    );
    let b = d.decode("spBv1.0/plant/NBIRTH/edge1", &birth, now).unwrap();
    assert_eq!(
        values(&b),
        vec![
            ("plant:edge1".into(), "Offset".into(), -2.0, Quality::Good),
            ("plant:edge1".into(), "Running".into(), 1.0, Quality::Good),
            (
                "plant:edge1".into(),
                "Temperature".into(),
                21.5,
                Quality::Good
            ),
        ]
    );
    assert!(b.rebirth.is_none());
    // A device's birth, then data by alias only (no name, no datatype).
    let dbirth = payload(
        1,
        vec![metric(
            Some("Pressure"),
            Some(10),
            Some(DataType::Int8),
            metric::Value::IntValue(0xFF),
        )],
    );
    let db = d
        .decode("spBv1.0/plant/DBIRTH/edge1/pump", &dbirth, now)
        .unwrap();
    assert_eq!(
        values(&db),
        vec![(
            "plant:edge1:pump".into(),
            "Pressure".into(),
            -1.0,
            Quality::Good
        )]
    );
    let ddata = payload(
        2,
        vec![metric(
            None,
            Some(10),
            None,
            metric::Value::IntValue(0xFFFF_FF80),
        )],
    );
    let dd = d
        .decode("spBv1.0/plant/DDATA/edge1/pump", &ddata, now)
        .unwrap();
    assert_eq!(
        values(&dd),
        vec![(
            "plant:edge1:pump".into(),
            "Pressure".into(),
            -128.0,
            Quality::Good
        )]
    );
    let ndata = payload(
        3,
        vec![metric(
            None,
            Some(1),
            None,
            metric::Value::DoubleValue(22.0),
        )],
    );
    let nd = d.decode("spBv1.0/plant/NDATA/edge1", &ndata, now).unwrap();
    assert_eq!(
        values(&nd),
        vec![(
            "plant:edge1".into(),
            "Temperature".into(),
            22.0,
            Quality::Good
        )]
    );
    // An unknown alias: nothing stored from the message, a rebirth asked for.
    let unknown = payload(
        4,
        vec![metric(
            None,
            Some(99),
            None,
            metric::Value::DoubleValue(1.0),
        )],
    );
    let u = d
        .decode("spBv1.0/plant/NDATA/edge1", &unknown, now)
        .unwrap();
    assert!(u.points.is_empty());
    assert_eq!(u.rebirth.unwrap().2, "an unknown alias");
    // Born again; then a gap in seq (5 expected after the birth's 4... 6 sent).
    let rebirth = payload(
        4,
        vec![
            metric(
                Some("bdSeq"),
                None,
                Some(DataType::UInt64),
                metric::Value::LongValue(3),
            ),
            metric(
                Some("Temperature"),
                Some(1),
                Some(DataType::Double),
                metric::Value::DoubleValue(23.0),
            ),
        ],
    );
    d.decode("spBv1.0/plant/NBIRTH/edge1", &rebirth, now)
        .unwrap();
    let gap = d
        .decode(
            "spBv1.0/plant/NDATA/edge1",
            &payload(
                6,
                vec![metric(None, Some(1), None, metric::Value::DoubleValue(1.0))],
            ),
            now,
        )
        .unwrap();
    assert_eq!(gap.rebirth.unwrap().2, "a gap in seq");
    // Born again, device too; a death of another session is ignored, this session's marks
    // every tag bad.
    d.decode("spBv1.0/plant/NBIRTH/edge1", &rebirth, now)
        .unwrap();
    d.decode(
        "spBv1.0/plant/DBIRTH/edge1/pump",
        &payload(
            5,
            vec![metric(
                Some("Pressure"),
                Some(10),
                Some(DataType::Int8),
                metric::Value::IntValue(4),
            )],
        ),
        now,
    )
    .unwrap();
    let other = Payload {
        metrics: vec![metric(
            Some("bdSeq"),
            None,
            Some(DataType::UInt64),
            metric::Value::LongValue(2),
        )],
        ..Default::default()
    }
    .encode_to_vec();
    assert!(
        d.decode("spBv1.0/plant/NDEATH/edge1", &other, now)
            .unwrap()
            .points
            .is_empty()
    );
    let death = Payload {
        metrics: vec![metric(
            Some("bdSeq"),
            None,
            Some(DataType::UInt64),
            metric::Value::LongValue(3),
        )],
        ..Default::default()
    }
    .encode_to_vec();
    let dead = d.decode("spBv1.0/plant/NDEATH/edge1", &death, now).unwrap();
    assert_eq!(
        values(&dead),
        vec![
            (
                "plant:edge1:pump".into(),
                "Pressure".into(),
                4.0,
                Quality::Bad
            ),
            (
                "plant:edge1".into(),
                "Temperature".into(),
                23.0,
                Quality::Bad
            ),
        ]
    );
    // Not Sparkplug, or not a data topic.
    assert!(
        d.decode("spBv1.0/plant/NDATA/edge1", b"\xff\xff", now)
            .is_err()
    );
    assert_eq!(
        d.decode("spBv1.0/STATE/host", b"", now).unwrap(),
        Decoded::default()
    );
    let (topic, body) = rebirth_request("plant", "edge1", now);
    assert_eq!(topic, "spBv1.0/plant/NCMD/edge1");
    let p = Payload::decode(body.as_slice()).unwrap();
    assert_eq!(p.metrics[0].name.as_deref(), Some(REBIRTH));
}
