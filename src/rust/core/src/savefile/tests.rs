use super::*;

fn sample() -> SaveValue {
    let a = |names: Option<Vec<&str>>, dim: Option<Vec<i32>>| Attrs {
        names: names.map(|n| n.into_iter().map(|s| Some(s.to_string())).collect()),
        dim,
    };
    SaveValue::List(
        vec![
            SaveValue::String(vec![Some("ggmlR model".into()), None, Some("é".into())], a(None, None)),
            SaveValue::Integer(vec![1, i32::MIN], a(None, None)),
            SaveValue::Double(vec![1.5, -0.0, f64::NAN, 6.0, 7.0, 8.0], a(None, Some(vec![2, 3]))),
            SaveValue::Logical(vec![Some(true), None], a(None, None)),
            SaveValue::Null,
            SaveValue::List(vec![], a(Some(vec![]), None)),
        ],
        a(Some(vec!["a", "b", "c", "d", "e", "f"]), None),
    )
}

fn same(a: &SaveValue, b: &SaveValue) -> bool {
    // NaN-aware equality through the encoding.
    encode(a) == encode(b)
}

#[test]
fn round_trip() {
    let v = sample();
    let back = decode(&encode(&v)).unwrap();
    assert!(same(&v, &back));
    assert_eq!(back.len(), 6);
}

#[test]
fn every_flipped_bit_and_every_truncation_is_refused() {
    let bytes = encode(&sample());
    for i in 0..bytes.len() {
        for bit in 0..8 {
            let mut b = bytes.clone();
            b[i] ^= 1 << bit;
            assert!(decode(&b).is_err(), "bit {bit} of byte {i} flipped was accepted");
        }
    }
    for n in 0..bytes.len() {
        let e = decode(&bytes[..n]).unwrap_err().to_string();
        assert!(e.contains("truncated") || e.contains("not a model") || e.contains("header"), "{n}: {e}");
    }
}

#[test]
fn foreign_files_are_named() {
    let e = decode(&[0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3]).unwrap_err().to_string();
    assert!(e.contains("RDS"), "{e}");
    let mut b = encode(&SaveValue::Null);
    b[8] = 9;
    assert!(decode(&b).unwrap_err().to_string().contains("version 9"));
}

#[test]
fn lengths_cannot_ask_for_more_than_the_file() {
    // A valid header around a payload announcing 2^60 doubles.
    let mut p = vec![3u8];
    p.extend_from_slice(&(1u64 << 60).to_le_bytes());
    let mut f = MAGIC.to_vec();
    f.extend_from_slice(&VERSION.to_le_bytes());
    f.extend_from_slice(&(p.len() as u64).to_le_bytes());
    f.extend_from_slice(&crc32fast::hash(&p).to_le_bytes());
    f.extend_from_slice(&p);
    assert!(decode(&f).unwrap_err().to_string().contains("exceeds the file"));
    // Deep nesting.
    let mut p = Vec::new();
    for _ in 0..200 {
        p.push(5u8);
        p.extend_from_slice(&1u64.to_le_bytes());
    }
    let mut f = MAGIC.to_vec();
    f.extend_from_slice(&VERSION.to_le_bytes());
    f.extend_from_slice(&(p.len() as u64).to_le_bytes());
    f.extend_from_slice(&crc32fast::hash(&p).to_le_bytes());
    f.extend_from_slice(&p);
    assert!(decode(&f).unwrap_err().to_string().contains("nested"));
}

#[test]
fn atomic_write_keeps_the_old_file_on_failure() {
    let dir = std::env::temp_dir().join(format!("ggmlr-savefile-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("m.ggmlr");
    write_atomic(&f, b"first").unwrap();
    write_atomic(&f, b"second").unwrap();
    assert_eq!(std::fs::read(&f).unwrap(), b"second");
    assert!(write_atomic(&dir, b"x").unwrap_err().to_string().contains("folder"));
    assert!(write_atomic(std::path::Path::new("/dev/null"), b"x").unwrap_err().to_string().contains("regular file"));
    assert!(write_atomic(&dir.join("no/such/m"), b"x").is_err());
    let left: Vec<_> = std::fs::read_dir(&dir).unwrap().collect();
    assert_eq!(left.len(), 1, "no temporary file is left behind");
    std::fs::remove_dir_all(&dir).unwrap();
}
