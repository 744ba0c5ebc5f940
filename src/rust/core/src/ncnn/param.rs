//! Layer parameters (ParamDict) and the two param formats: text `.param` and
//! binary `.param.bin`. Both produce a [`NetSpec`]: layers with blob indices.

use crate::ncnn::err;
use crate::ncnn_bail;

pub const MAGIC: i32 = 7767517;
pub const MAX_PARAM: usize = 32;

/// One parameter value.
#[derive(Clone, Debug, PartialEq)]
pub enum ParamValue {
    None,
    /// 4 raw bytes from a binary param: read as int or float by the getter.
    Raw(u32),
    Int(i32),
    Float(f32),
    /// An array: every element's 4 bytes as written (a text element is
    /// stored as an int or a float by its own spelling, as ncnn does), and
    /// how a reader should take them.
    Array(Vec<u32>, ArrayKind),
    Str(String),
}

/// How the elements of an array parameter read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArrayKind {
    /// From a binary param: the bytes are read as the reader asks.
    Raw,
    /// A text array whose last element is written as an int: every element
    /// counts as an int (a float reader converts the value).
    Int,
    /// A text array whose last element is written as a float: every element
    /// counts as a float.
    Float,
}

/// The up to 32 parameters of one layer, by id.
#[derive(Clone, Debug)]
pub struct ParamDict {
    pub values: Vec<ParamValue>,
}

impl Default for ParamDict {
    fn default() -> Self {
        ParamDict {
            values: vec![ParamValue::None; MAX_PARAM],
        }
    }
}

impl ParamDict {
    /// Parameter `id` (`ParamValue::None` when absent or past the last id).
    pub fn value(&self, id: usize) -> &ParamValue {
        self.values.get(id).unwrap_or(&ParamValue::None)
    }
    /// Set parameter `id`; an id past the last is an error naming `at`.
    pub fn set(&mut self, id: usize, v: ParamValue, at: &str) -> anyhow::Result<()> {
        let Some(slot) = self.values.get_mut(id) else {
            ncnn_bail!("{at}: parameter id {id} is out of range (ids are 0 to {})", MAX_PARAM - 1);
        };
        *slot = v;
        Ok(())
    }
    pub fn has(&self, id: usize) -> bool {
        !matches!(self.value(id), ParamValue::None)
    }
    /// Integer parameter `id`; a value written as a float keeps the default.
    pub fn int(&self, id: usize, def: i32) -> i32 {
        match *self.value(id) {
            ParamValue::Raw(b) => b as i32,
            ParamValue::Int(i) => i,
            _ => def,
        }
    }
    /// Float parameter `id`; an integer value converts.
    pub fn float(&self, id: usize, def: f32) -> f32 {
        match *self.value(id) {
            ParamValue::Raw(b) => f32::from_bits(b),
            ParamValue::Int(i) => i as f32,
            ParamValue::Float(f) => f,
            _ => def,
        }
    }
    /// Whether parameter `id` is an array.
    pub fn is_array(&self, id: usize) -> bool {
        matches!(self.value(id), ParamValue::Array(..))
    }
    /// Array parameter `id` as ints (empty when absent).
    pub fn ints(&self, id: usize) -> Vec<i32> {
        match self.value(id) {
            ParamValue::Array(v, ArrayKind::Float) => v.iter().map(|b| f32::from_bits(*b) as i32).collect(),
            ParamValue::Array(v, _) => v.iter().map(|b| *b as i32).collect(),
            _ => vec![],
        }
    }
    /// Array parameter `id` as floats (empty when absent); an int array's
    /// values convert.
    pub fn floats(&self, id: usize) -> Vec<f32> {
        match self.value(id) {
            ParamValue::Array(v, ArrayKind::Int) => v.iter().map(|b| *b as i32 as f32).collect(),
            ParamValue::Array(v, _) => v.iter().map(|b| f32::from_bits(*b)).collect(),
            _ => vec![],
        }
    }
    /// Array parameter `id` with every element's bytes read as a float,
    /// whatever its spelling (how a few layers read index tables).
    pub fn floats_raw(&self, id: usize) -> Vec<f32> {
        match self.value(id) {
            ParamValue::Array(v, _) => v.iter().map(|b| f32::from_bits(*b)).collect(),
            _ => vec![],
        }
    }
}

/// One layer as declared in a param file.
#[derive(Clone, Debug)]
pub struct LayerSpec {
    /// Type name (text format) or empty (binary format).
    pub type_name: String,
    /// Type index (binary format).
    pub type_index: Option<i32>,
    pub name: String,
    pub bottoms: Vec<usize>,
    pub tops: Vec<usize>,
    pub params: ParamDict,
    /// Where the layer was declared: "line N" or "byte N".
    pub location: String,
}

#[derive(Clone, Debug, Default)]
pub struct BlobSpec {
    pub name: String,
    pub producer: Option<usize>,
    pub consumer: Option<usize>,
}

#[derive(Clone, Debug, Default)]
pub struct NetSpec {
    pub layers: Vec<LayerSpec>,
    pub blobs: Vec<BlobSpec>,
}

impl LayerSpec {
    /// "layer 'conv1' (Convolution, line 4)".
    pub fn describe(&self) -> String {
        let t = if self.type_name.is_empty() {
            format!("type index {}", self.type_index.unwrap_or(-1))
        } else {
            self.type_name.clone()
        };
        format!("layer '{}' ({}, {})", self.name, t, self.location)
    }
}

struct Tokens<'a> {
    toks: Vec<(&'a str, usize)>,
    pos: usize,
}

impl<'a> Tokens<'a> {
    fn new(text: &'a str) -> Tokens<'a> {
        let mut toks = Vec::new();
        for (ln, line) in text.lines().enumerate() {
            for t in line.split_whitespace() {
                toks.push((t, ln + 1));
            }
        }
        Tokens { toks, pos: 0 }
    }
    fn line(&self) -> usize {
        self.toks
            .get(self.pos)
            .or(self.toks.last())
            .map(|t| t.1)
            .unwrap_or(1)
    }
    fn next(&mut self, what: &str) -> anyhow::Result<&'a str> {
        match self.toks.get(self.pos) {
            Some(t) => {
                self.pos += 1;
                Ok(t.0)
            }
            None => Err(err(format!(
                "param ends early at line {}: expected {what}",
                self.line()
            ))),
        }
    }
    fn int(&mut self, what: &str) -> anyhow::Result<i32> {
        let line = self.line();
        let t = self.next(what)?;
        t.parse::<i32>().map_err(|_| {
            err(format!(
                "param line {line}: expected {what} (a whole number), got '{t}'"
            ))
        })
    }
    /// Is the next token a `key=value` pair (rather than the next layer's type)?
    fn peek_is_pair(&self) -> bool {
        match self.toks.get(self.pos) {
            Some((t, _)) => match t.split_once('=') {
                Some((k, _)) => k.parse::<i32>().is_ok(),
                None => false,
            },
            None => false,
        }
    }
}

fn is_float_token(s: &str) -> bool {
    s.contains('.') || s.contains('e') || s.contains('E')
}

fn parse_scalar(s: &str, line: usize, key: i32) -> anyhow::Result<ParamValue> {
    let first = s.chars().next().unwrap_or(' ');
    if first == '"' || (first.is_ascii_alphabetic() && !matches!(s, "inf" | "nan" | "-inf")) {
        return Ok(ParamValue::Str(s.trim_matches('"').to_string()));
    }
    if is_float_token(s) || matches!(s, "inf" | "nan" | "-inf") {
        s.parse::<f32>().map(ParamValue::Float).map_err(|_| {
            err(format!(
                "param line {line}: key {key} has a malformed float value '{s}'"
            ))
        })
    } else {
        s.parse::<i32>().map(ParamValue::Int).map_err(|_| {
            err(format!(
                "param line {line}: key {key} has a malformed integer value '{s}'"
            ))
        })
    }
}

fn parse_pair(tok: &str, line: usize, pd: &mut ParamDict) -> anyhow::Result<()> {
    let Some((k, v)) = tok.split_once('=') else {
        ncnn_bail!("param line {line}: expected key=value, got '{tok}'");
    };
    let key: i32 = k
        .parse()
        .map_err(|_| err(format!("param line {line}: malformed key in '{tok}'")))?;
    if key <= -23300 {
        let id = (-23300 - key) as usize;
        if id >= MAX_PARAM {
            ncnn_bail!("param line {line}: array key {key} names id {id}, ids go up to 31");
        }
        let mut parts = v.split(',');
        let len: usize = parts.next().and_then(|s| s.parse().ok()).ok_or_else(|| {
            err(format!(
                "param line {line}: array key {key} needs a length first, got '{v}'"
            ))
        })?;
        let items: Vec<&str> = parts.collect();
        if items.len() != len {
            ncnn_bail!(
                "param line {line}: array key {key} declares {len} values but has {}",
                items.len()
            );
        }
        let mut out = Vec::with_capacity(len);
        for s in &items {
            let bits = if is_float_token(s) {
                s.parse::<f32>().map(f32::to_bits)
                    .map_err(|_| err(format!("param line {line}: array key {key}: malformed value '{s}'")))?
            } else {
                s.parse::<i32>().map(|i| i as u32)
                    .map_err(|_| err(format!("param line {line}: array key {key}: malformed value '{s}'")))?
            };
            out.push(bits);
        }
        let kind = match items.last() {
            Some(s) if is_float_token(s) => ArrayKind::Float,
            _ => ArrayKind::Int,
        };
        return pd.set(id, ParamValue::Array(out, kind), &format!("param line {line}"));
    }
    if key < 0 || key as usize >= MAX_PARAM {
        ncnn_bail!("param line {line}: key {key} is out of range (ids are 0 to 31, arrays -23300 to -23331)");
    }
    pd.set(key as usize, parse_scalar(v, line, key)?, &format!("param line {line}"))
}

/// Collect blob producers/consumers and check the graph's basic rules.
fn link(spec: &mut NetSpec, declared_blobs: usize) -> anyhow::Result<()> {
    if spec.blobs.len() > declared_blobs {
        ncnn_bail!(
            "param declares {declared_blobs} blobs but its layers use {}; fix the blob count on the second line",
            spec.blobs.len()
        );
    }
    let n = spec.blobs.len();
    for (li, l) in spec.layers.iter().enumerate() {
        // ncnn lets the last consumer win; so does this (fan-out should go
        // through Split).
        for (&b, is_top) in l.bottoms.iter().map(|b| (b, false)).chain(l.tops.iter().map(|t| (t, true))) {
            let Some(blob) = spec.blobs.get_mut(b) else {
                ncnn_bail!("{}: blob index {b} is outside the {n} blobs declared", l.location);
            };
            if is_top {
                blob.producer = Some(li);
            } else {
                blob.consumer = Some(li);
            }
        }
    }
    Ok(())
}

/// Parse a text param.
pub fn parse_text(text: &str) -> anyhow::Result<NetSpec> {
    let mut tk = Tokens::new(text);
    let magic = tk.int("the magic number 7767517")?;
    if magic != MAGIC {
        ncnn_bail!(
            "param is too old or not an ncnn param: magic number is {magic}, expected {MAGIC}"
        );
    }
    let layer_count = tk.int("the layer count")?;
    let blob_count = tk.int("the blob count")?;
    if layer_count <= 0 || blob_count <= 0 {
        ncnn_bail!("param line {}: layer count ({layer_count}) and blob count ({blob_count}) must be positive", tk.line());
    }
    let mut spec = NetSpec::default();
    let mut names: std::collections::HashMap<String, usize> = Default::default();
    for _ in 0..layer_count {
        let line = tk.line();
        let type_name = tk.next("a layer type")?.to_string();
        let name = tk.next("a layer name")?.to_string();
        let nb = tk.int("the number of bottom blobs")?;
        let nt = tk.int("the number of top blobs")?;
        if !(0..=65536).contains(&nb) || !(0..=65536).contains(&nt) {
            ncnn_bail!("param line {line}: layer '{name}' has an invalid blob count ({nb} bottoms, {nt} tops)");
        }
        let mut bottoms = Vec::new();
        for _ in 0..nb {
            let bn = tk.next("a bottom blob name")?;
            let idx = match names.get(bn) {
                Some(&i) => i,
                None => {
                    spec.blobs.push(BlobSpec {
                        name: bn.to_string(),
                        ..Default::default()
                    });
                    names.insert(bn.to_string(), spec.blobs.len() - 1);
                    spec.blobs.len() - 1
                }
            };
            bottoms.push(idx);
        }
        let mut tops = Vec::new();
        for _ in 0..nt {
            let tn = tk.next("a top blob name")?;
            spec.blobs.push(BlobSpec {
                name: tn.to_string(),
                ..Default::default()
            });
            names.insert(tn.to_string(), spec.blobs.len() - 1);
            tops.push(spec.blobs.len() - 1);
        }
        let mut params = ParamDict::default();
        while tk.peek_is_pair() {
            let pl = tk.line();
            let t = tk.next("a parameter")?;
            parse_pair(t, pl, &mut params)
                .map_err(|e| err(format!("{e} (layer '{name}', {type_name})")))?;
        }
        spec.layers.push(LayerSpec {
            type_name,
            type_index: None,
            name,
            bottoms,
            tops,
            params,
            location: format!("line {line}"),
        });
    }
    link(&mut spec, blob_count as usize)?;
    Ok(spec)
}

struct Words<'a> {
    b: &'a [u8],
    pos: usize,
}

impl<'a> Words<'a> {
    fn i32(&mut self, what: &str) -> anyhow::Result<i32> {
        let word = self.b.get(self.pos..self.pos.saturating_add(4)).and_then(|w| <[u8; 4]>::try_from(w).ok());
        let Some(word) = word else {
            ncnn_bail!(
                "binary param ends early at byte {}: expected {what}",
                self.pos
            );
        };
        let v = i32::from_le_bytes(word);
        self.pos += 4;
        Ok(v)
    }
    fn bytes(&mut self, n: usize, what: &str) -> anyhow::Result<&'a [u8]> {
        if n > self.b.len() - self.pos {
            ncnn_bail!(
                "binary param ends early at byte {}: {what} needs {n} bytes",
                self.pos
            );
        }
        let s = self.b.get(self.pos..self.pos + n).unwrap_or(&[]);
        self.pos += n;
        Ok(s)
    }
}

/// Parse a binary param (`.param.bin`).
pub fn parse_binary(b: &[u8]) -> anyhow::Result<NetSpec> {
    let mut w = Words { b, pos: 0 };
    let magic = w.i32("the magic number")?;
    if magic != MAGIC {
        ncnn_bail!("binary param is too old or not an ncnn param: magic number is {magic}, expected {MAGIC}");
    }
    let layer_count = w.i32("the layer count")?;
    let blob_count = w.i32("the blob count")?;
    if layer_count <= 0 || blob_count <= 0 {
        ncnn_bail!("binary param: layer count ({layer_count}) and blob count ({blob_count}) must be positive");
    }
    let nblob = blob_count as usize;
    if nblob > b.len() / 4 {
        ncnn_bail!(
            "binary param declares {nblob} blobs, more than a file of {} bytes can use",
            b.len()
        );
    }
    let mut spec = NetSpec::default();
    for li in 0..layer_count {
        let at = w.pos;
        let typeindex = w.i32("a layer type index")?;
        let nb = w.i32("the number of bottom blobs")?;
        let nt = w.i32("the number of top blobs")?;
        if !(0..=65536).contains(&nb) || !(0..=65536).contains(&nt) {
            ncnn_bail!("binary param byte {at}: layer {li} has an invalid blob count ({nb} bottoms, {nt} tops)");
        }
        let idx = |w: &mut Words, what: &str| -> anyhow::Result<usize> {
            let p = w.pos;
            let v = w.i32(what)?;
            if v < 0 || v as usize >= nblob {
                ncnn_bail!(
                    "binary param byte {p}: blob index {v} is outside 0..{}",
                    nblob - 1
                );
            }
            Ok(v as usize)
        };
        let mut bottoms = Vec::new();
        for _ in 0..nb {
            bottoms.push(idx(&mut w, "a bottom blob index")?);
        }
        let mut tops = Vec::new();
        for _ in 0..nt {
            tops.push(idx(&mut w, "a top blob index")?);
        }
        let mut params = ParamDict::default();
        loop {
            let p = w.pos;
            let id = w.i32("a parameter id or the end marker -233")?;
            if id == -233 {
                break;
            }
            if id <= -23400 {
                let k = (-23400 - id) as usize;
                let len = w.i32("a string length")?;
                if k >= MAX_PARAM || len < 0 {
                    ncnn_bail!("binary param byte {p}: bad string parameter {id} (length {len})");
                }
                let n = (len as usize + 3) / 4 * 4;
                let s = w.bytes(n, "a string parameter")?;
                let text = String::from_utf8_lossy(s.get(..len as usize).unwrap_or(s));
                params.set(k, ParamValue::Str(text.trim_end_matches('\0').to_string()), &format!("binary param byte {p}"))?;
            } else if id <= -23300 {
                let k = (-23300 - id) as usize;
                let len = w.i32("an array length")?;
                if k >= MAX_PARAM || len < 0 {
                    ncnn_bail!("binary param byte {p}: bad array parameter {id} (length {len})");
                }
                let s = w.bytes(len as usize * 4, "an array parameter")?;
                let words = crate::base::bytes::groups(s).map(u32::from_le_bytes).collect();
                params.set(k, ParamValue::Array(words, ArrayKind::Raw), &format!("binary param byte {p}"))?;
            } else {
                if id < 0 || id as usize >= MAX_PARAM {
                    ncnn_bail!(
                        "binary param byte {p}: parameter id {id} is out of range (0 to 31)"
                    );
                }
                let v = w.i32("a parameter value")?;
                params.set(id as usize, ParamValue::Raw(v as u32), &format!("binary param byte {p}"))?;
            }
        }
        spec.layers.push(LayerSpec {
            type_name: String::new(),
            type_index: Some(typeindex),
            name: String::new(),
            bottoms,
            tops,
            params,
            location: format!("byte {at}"),
        });
    }
    spec.blobs = vec![BlobSpec::default(); nblob];
    link(&mut spec, nblob)?;
    Ok(spec)
}
