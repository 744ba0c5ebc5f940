//! Attention: the ONNX Attention operator (opsets 23 and later: 3-D or 4-D
//! inputs, grouped key/value heads, past key/value caches, boolean or
//! additive masks, causal and sliding-window masks, softcap, the optional
//! score output) and com.microsoft's MultiHeadAttention and Attention, all
//! as matrix products around the engine's row softmax.

use super::common::{arg, opt, Fold, Lower};
use crate::base::dtype::DType;
use crate::models::onnx::dev::{binary, concat, expand, permute, reduce, reshape, unary};
use crate::models::onnx::elem::Elem;
use crate::models::onnx::host::{fmt_shape, HTensor};
use crate::models::onnx::model::OnnxNode;
use crate::models::onnx::plan::Planner;
use crate::models::onnx::val::{Dev, Val};
use crate::op::{BinFn, Op, PadMode, RowFn, UnaryOp};
use anyhow::{bail, ensure};

pub fn find(op: &str) -> Option<(Option<Lower>, Option<Fold>)> {
    Some(match op {
        "Attention" => (Some(lower_attention), None),
        "MultiHeadAttention" => (Some(lower_mha), None),
        _ => return None,
    })
}

const NEG_INF: f64 = f64::NEG_INFINITY;

/// [B, S, heads * hd] -> [B, heads, S, hd]
// BOUNDS-FN: rank 3 is checked first.
fn split_heads(p: &mut Planner, x: &Dev, heads: usize) -> crate::Result<Dev> {
    ensure!(x.shape.len() == 3, "an input to split into heads must be [batch, sequence, hidden], not {}", fmt_shape(&x.shape));
    let (b, s, hid) = (x.shape[0], x.shape[1], x.shape[2]);
    ensure!(heads > 0 && hid % heads == 0, "a hidden size of {hid} does not split into {heads} heads");
    let r = reshape(p.eb(), x, vec![b, s, heads, hid / heads])?;
    permute(p.eb(), &r, &[0, 2, 1, 3])
}

/// [B, heads, S, hd] -> [B, S, heads * hd]
// BOUNDS-FN: rank 4 is checked first.
fn merge_heads(p: &mut Planner, x: &Dev) -> crate::Result<Dev> {
    ensure!(x.shape.len() == 4, "internal: merging the heads of {}", fmt_shape(&x.shape));
    let (b, h, s, d) = (x.shape[0], x.shape[1], x.shape[2], x.shape[3]);
    let t = permute(p.eb(), x, &[0, 2, 1, 3])?;
    reshape(p.eb(), &t, vec![b, s, h * d])
}

/// Each of the `kvh` heads of `x` [B, kvh, S, d] repeated `rep` times in place.
// BOUNDS-FN: rank 4 is checked before the shape is read.
fn repeat_heads(p: &mut Planner, x: &Dev, rep: usize) -> crate::Result<Dev> {
    if rep == 1 {
        return Ok(x.clone());
    }
    ensure!(x.shape.len() == 4, "internal: repeating the heads of {}", fmt_shape(&x.shape));
    let (b, h, s, d) = (x.shape[0], x.shape[1], x.shape[2], x.shape[3]);
    let r = reshape(p.eb(), x, vec![b, h, 1, s, d])?;
    let e = expand(p.eb(), &r, &[b, h, rep, s, d])?;
    reshape(p.eb(), &e, vec![b, h * rep, s, d])
}

fn neg_inf_scalar(p: &mut Planner, elem: Elem) -> crate::Result<Dev> {
    let t = p.b.data([1, 1, 1, 1], vec![f32::NEG_INFINITY])?;
    Ok(Dev { t, shape: vec![], elem })
}

/// An additive bias from a mask: booleans give 0 where true and -inf where
/// false; numbers add as they are.
fn mask_bias(p: &mut Planner, m: &Val, elem: Elem) -> crate::Result<Dev> {
    let d = p.dev(m)?;
    if m.elem() != Elem::Bool {
        return Ok(d);
    }
    let ninf = neg_inf_scalar(p, elem)?;
    binary(p.eb(), BinFn::MaskNot, &ninf, &d, elem)
}

/// The attention core: softmax(qk_scale(q k^T) + bias) v with fully masked
/// rows (bias -inf everywhere) giving zeros. Returns Y and the scores of
/// `mode` (0/1: after softcap, 2: with the bias, 3: after softmax).
#[allow(clippy::too_many_arguments)]
fn attend(p: &mut Planner, q: &Dev, k: &Dev, v: &Dev, bias: Option<Dev>, scale: f32, softcap: f32, mode: i64) -> crate::Result<(Dev, Dev)> {
    let elem = q.elem;
    let s = scale.sqrt();
    let qs = unary(p.eb(), Op::Scale { s: f64::from(s) }, q, elem)?;
    let ks = unary(p.eb(), Op::Scale { s: f64::from(s) }, k, elem)?;
    let r = ks.shape.len();
    let mut perm: Vec<usize> = (0..r).collect();
    perm.swap(r - 1, r - 2);
    let kt = permute(p.eb(), &ks, &perm)?;
    let mut qk = super::matmul::matmul(p, &Val::D(qs), &Val::D(kt))?;
    if softcap > 0.0 {
        let t = unary(p.eb(), Op::Scale { s: f64::from(1.0 / softcap) }, &qk, elem)?;
        let t = unary(p.eb(), Op::Unary(UnaryOp::Tanh), &t, elem)?;
        qk = unary(p.eb(), Op::Scale { s: f64::from(softcap) }, &t, elem)?;
    }
    let mut scores_out = qk.clone();
    let with_bias = match &bias {
        Some(b) => binary(p.eb(), BinFn::Add, &qk, b, elem)?,
        None => qk.clone(),
    };
    if mode == 2 {
        scores_out = with_bias.clone();
    }
    let rr = with_bias.shape.len();
    let (rows, perm) = crate::models::onnx::dev::rows_along(p.eb(), &with_bias, rr - 1)?;
    let sm = p.b.op(Op::SoftMax { scale: 1.0, max_bias: 0.0 }, &[rows])?;
    let mut probs = crate::models::onnx::dev::from_rows(p.eb(), sm, &with_bias, perm, elem)?;
    if let Some(b) = &bias {
        // Rows whose bias is -inf everywhere attend to nothing: zeros.
        let br = b.shape.len();
        let mx = reduce(p.eb(), RowFn::Max, b, &[br - 1], true)?;
        let floor = Dev { t: p.b.data([1, 1, 1, 1], vec![f32::MIN])?, shape: vec![], elem };
        let ok = binary(p.eb(), BinFn::Greater, &mx, &floor, Elem::Bool)?;
        probs = binary(p.eb(), BinFn::Mask, &probs, &ok, elem)?;
    }
    if mode == 3 {
        scores_out = probs.clone();
    }
    let y = super::matmul::matmul(p, &Val::D(probs), &Val::D(v.clone()))?;
    Ok((y, scores_out))
}

/// A [q, kv] additive mask of -inf outside a causal frontier (query i sees
/// keys j <= i + offset) and outside a sliding window (-1: unbounded).
// BOUNDS-FN: v has q * kv entries and i * kv + j < q * kv for i < q, j < kv.
fn structure_bias(q: usize, kv: usize, causal: bool, offset: i64, left: i64, right: i64) -> crate::Result<Option<HTensor>> {
    if !causal && left < 0 && right < 0 {
        return Ok(None);
    }
    let mut v = vec![0.0f64; q * kv];
    for i in 0..q {
        for j in 0..kv {
            let diff = i as i64 + offset - j as i64;
            let ok = (!causal || diff >= 0) && (left < 0 || diff <= left) && (right < 0 || -diff <= right);
            if !ok {
                v[i * kv + j] = NEG_INF;
            }
        }
    }
    Ok(Some(HTensor::from_f64(Elem::F32, vec![q, kv], v)?))
}

// BOUNDS-FN: Q, K, V are checked to have one rank, 3 (split into 4-D heads) or 4; past
// tensors are checked 4-D; the mask's r >= 1 when its last size is read (an empty shape
// takes skv); the structure bias has sq * skv values.
fn lower_attention(p: &mut Planner, n: &OnnxNode, ins: &[Option<Val>]) -> crate::Result<Vec<Val>> {
    // com.microsoft's Attention has num_heads (ONNX's: q_num_heads, kv_num_heads).
    if n.domain == "com.microsoft" || n.has("num_heads") {
        return lower_ms_attention(p, n, ins);
    }
    let (qv, kv, vv) = (arg(ins, 0, "Q")?.clone(), arg(ins, 1, "K")?.clone(), arg(ins, 2, "V")?.clone());
    let (mut q, mut k, mut v) = (p.dev(&qv)?, p.dev(&kv)?, p.dev(&vv)?);
    let three = q.shape.len() == 3;
    ensure!(q.shape.len() == k.shape.len() && k.shape.len() == v.shape.len(), "Q, K and V must have one rank");
    ensure!(three || q.shape.len() == 4, "Attention needs 3-D or 4-D Q, K, V, not {}", fmt_shape(&q.shape));
    let elem = super::common::float_result(q.elem);
    if three {
        let qh = n.int("q_num_heads", 0) as usize;
        let kh = n.int("kv_num_heads", 0) as usize;
        ensure!(qh > 0 && kh > 0, "Attention with 3-D inputs needs q_num_heads and kv_num_heads");
        q = split_heads(p, &q, qh)?;
        k = split_heads(p, &k, kh)?;
        v = split_heads(p, &v, kh)?;
    }
    let past = match (opt(ins, 4), opt(ins, 5)) {
        (Some(a), Some(b)) => Some((p.dev(a)?, p.dev(b)?)),
        (None, None) => None,
        _ => bail!("past_key and past_value must be given together"),
    };
    if let Some((pk, pv)) = &past {
        ensure!(pk.shape.len() == 4 && pv.shape.len() == 4, "past_key and past_value must be 4-D, not {} and {}", fmt_shape(&pk.shape), fmt_shape(&pv.shape));
    }
    let past_len = past.as_ref().map_or(0, |(pk, _)| pk.shape[2]);
    if let Some((pk, pv)) = &past {
        k = concat(p.eb(), &[pk.clone(), k], 2)?;
        v = concat(p.eb(), &[pv.clone(), v], 2)?;
    }
    let (present_k, present_v) = (k.clone(), v.clone());
    let (sq, skv) = (q.shape[2], k.shape[2]);
    let scale = if n.has("scale") { n.float("scale", 1.0) } else { 1.0 / (q.shape[3] as f32).sqrt() };
    // The bias: the mask (padded to the keys with -inf), the causal and
    // window structure, the padding of each batch's keys.
    let mut bias: Option<Dev> = None;
    if let Some(m) = opt(ins, 3) {
        let mut b = mask_bias(p, m, elem)?;
        let last = *b.shape.last().unwrap_or(&skv);
        if last < skv {
            let r = b.shape.len();
            let t = crate::models::onnx::dev::shaped(p.eb(), &b, [last, b.shape[..r - 1].iter().product(), 1, 1])?;
            let t = p.b.op(Op::PadEx { lo: [0; 4], hi: [skv - last, 0, 0, 0], mode: PadMode::Constant, value: f32::NEG_INFINITY }, &[t])?;
            let mut shape = b.shape.clone();
            shape[r - 1] = skv;
            let t = p.b.reshape(&t, crate::models::onnx::dev::ne_of(&shape))?;
            b = Dev { t, shape, elem };
        }
        bias = Some(b);
    }
    let causal = n.int("is_causal", 0) != 0;
    let nonpad = match opt(ins, 6) {
        Some(vl) => Some(p.ints_of(vl, "nonpad_kv_seqlen")?),
        None => None,
    };
    let (left, right) = (n.int("left_window_size", -1), n.int("right_window_size", -1));
    match &nonpad {
        None => {
            if let Some(sb) = structure_bias(sq, skv, causal, past_len as i64, left, right)? {
                let sd = p.upload_host(&sb, None, DType::F32)?;
                bias = Some(match bias {
                    Some(b) => binary(p.eb(), BinFn::Add, &b, &sd, elem)?,
                    None => sd,
                });
            }
        }
        Some(lens) => {
            // Per batch: causal frontier and key padding by its valid length.
            let bsz = q.shape[0];
            ensure!(lens.len() == bsz, "nonpad_kv_seqlen has {} values for a batch of {bsz}", lens.len());
            let mut all = Vec::with_capacity(bsz * sq * skv);
            for &l in lens.iter() {
                let sb = structure_bias(sq, skv, causal, l - sq as i64, left, right)?;
                for i in 0..sq {
                    for j in 0..skv {
                        let s = sb.as_ref().map_or(0.0, |t| t.f(i * skv + j));
                        all.push(if (j as i64) < l { s } else { NEG_INF });
                    }
                }
            }
            let sd = p.upload_host(&HTensor::from_f64(Elem::F32, vec![bsz, 1, sq, skv], all)?, None, DType::F32)?;
            bias = Some(match bias {
                Some(b) => binary(p.eb(), BinFn::Add, &b, &sd, elem)?,
                None => sd,
            });
        }
    }
    let (qh, kh) = (q.shape[1], k.shape[1]);
    ensure!(kh > 0 && qh % kh == 0, "{qh} query heads are not a multiple of {kh} key/value heads");
    let kr = repeat_heads(p, &k, qh / kh)?;
    let vr = repeat_heads(p, &v, qh / kh)?;
    let mode = n.int("qk_matmul_output_mode", 0);
    let (mut y, scores) = attend(p, &q, &kr, &vr, bias, scale, n.float("softcap", 0.0), mode)?;
    if three {
        y = merge_heads(p, &y)?;
    }
    Ok(vec![Val::D(y), Val::D(present_k), Val::D(present_v), Val::D(scores)])
}

/// com.microsoft MultiHeadAttention: query [B, S, hidden], key and value
/// [B, Skv, hidden] (or already split into heads), bias [3 * hidden],
/// key_padding_mask, attention_bias; num_heads, scale, unidirectional.
// BOUNDS-FN: the query is checked 3-D, key and value 3-D (split into heads) or 4-D, so
// q4, k4, v4 are 4-D.
fn lower_mha(p: &mut Planner, n: &OnnxNode, ins: &[Option<Val>]) -> crate::Result<Vec<Val>> {
    let heads = n.int("num_heads", 0) as usize;
    ensure!(heads > 0, "MultiHeadAttention needs num_heads");
    let mut q = p.dev(arg(ins, 0, "query")?)?;
    let mut k = p.dev(arg(ins, 1, "key")?)?;
    let mut v = p.dev(arg(ins, 2, "value")?)?;
    let elem = super::common::float_result(q.elem);
    ensure!(q.shape.len() == 3, "MultiHeadAttention's query must be [batch, sequence, hidden], not {}", fmt_shape(&q.shape));
    ensure!(
        (3..=4).contains(&k.shape.len()) && (3..=4).contains(&v.shape.len()),
        "MultiHeadAttention's key and value must be 3-D or 4-D, not {} and {}",
        fmt_shape(&k.shape),
        fmt_shape(&v.shape)
    );
    let hid = q.shape[2];
    if let Some(bv) = opt(ins, 3) {
        let b = p.dev(bv)?;
        ensure!(b.shape.iter().product::<usize>() == 3 * hid, "the bias must have 3 * hidden = {} values", 3 * hid);
        let bq = crate::models::onnx::dev::narrow(p.eb(), &b, 0, 0, hid)?;
        let bk = crate::models::onnx::dev::narrow(p.eb(), &b, 0, hid, hid)?;
        let bvv = crate::models::onnx::dev::narrow(p.eb(), &b, 0, 2 * hid, hid)?;
        q = binary(p.eb(), BinFn::Add, &q, &bq, elem)?;
        if k.shape.len() == 3 {
            k = binary(p.eb(), BinFn::Add, &k, &bk, elem)?;
            v = binary(p.eb(), BinFn::Add, &v, &bvv, elem)?;
        }
    }
    let q4 = split_heads(p, &q, heads)?;
    let k4 = if k.shape.len() == 3 { split_heads(p, &k, heads)? } else { k };
    let v4 = if v.shape.len() == 3 { split_heads(p, &v, heads)? } else { v };
    let (bsz, sq, skv) = (q4.shape[0], q4.shape[2], k4.shape[2]);
    let mut bias: Option<Dev> = None;
    if let Some(m) = opt(ins, 4) {
        // 1 keeps a key, 0 masks it: [B, Skv] or [B, Sq, Skv].
        let d = p.dev(m)?;
        let shape = if d.shape.len() == 2 { vec![bsz, 1, 1, skv] } else { vec![bsz, 1, sq, skv] };
        let d = reshape(p.eb(), &d, shape)?;
        let ninf = neg_inf_scalar(p, elem)?;
        bias = Some(binary(p.eb(), BinFn::MaskNot, &ninf, &d, elem)?);
    }
    if let Some(ab) = opt(ins, 5) {
        let d = p.dev(ab)?;
        bias = Some(match bias {
            Some(b) => binary(p.eb(), BinFn::Add, &b, &d, elem)?,
            None => d,
        });
    }
    if n.int("unidirectional", 0) != 0 {
        if let Some(sb) = structure_bias(sq, skv, true, skv as i64 - sq as i64, -1, -1)? {
            let sd = p.upload_host(&sb, None, DType::F32)?;
            bias = Some(match bias {
                Some(b) => binary(p.eb(), BinFn::Add, &b, &sd, elem)?,
                None => sd,
            });
        }
    }
    let scale = if n.has("scale") && n.float("scale", 0.0) != 0.0 { n.float("scale", 1.0) } else { 1.0 / (q4.shape[3] as f32).sqrt() };
    let (y, _) = attend(p, &q4, &k4, &v4, bias, scale, 0.0, 0)?;
    let y = merge_heads(p, &y)?;
    Ok(vec![Val::D(y)])
}

/// com.microsoft Attention: input [B, S, in] times weights [in, 3 * hidden]
/// (+ bias) split into Q, K, V; mask_index as a [B, S] 0/1 key mask.
// BOUNDS-FN: qkv is checked 3-D; sizes has 3 entries (given as 3, or three thirds);
// split_heads gives 4-D heads.
fn lower_ms_attention(p: &mut Planner, n: &OnnxNode, ins: &[Option<Val>]) -> crate::Result<Vec<Val>> {
    let heads = n.int("num_heads", 0) as usize;
    ensure!(heads > 0, "Attention needs num_heads");
    ensure!(opt(ins, 4).is_none(), "Attention with a past state is not supported");
    let x = arg(ins, 0, "input")?.clone();
    let w = arg(ins, 1, "weights")?.clone();
    let mut qkv = super::matmul::matmul(p, &x, &w)?;
    let elem = qkv.elem;
    if let Some(b) = opt(ins, 2) {
        let bd = p.dev(b)?;
        qkv = binary(p.eb(), BinFn::Add, &qkv, &bd, elem)?;
    }
    ensure!(qkv.shape.len() == 3, "Attention's input must be [batch, sequence, input], not {}", fmt_shape(x.shape()));
    let total = qkv.shape[2];
    let sizes: Vec<usize> = match n.ints("qkv_hidden_sizes") {
        Some(s) if s.len() == 3 => s.iter().map(|&x| x as usize).collect(),
        _ => vec![total / 3; 3],
    };
    ensure!(sizes.iter().sum::<usize>() == total, "qkv_hidden_sizes {sizes:?} do not add up to {total}");
    let q = crate::models::onnx::dev::narrow(p.eb(), &qkv, 2, 0, sizes[0])?;
    let k = crate::models::onnx::dev::narrow(p.eb(), &qkv, 2, sizes[0], sizes[1])?;
    let v = crate::models::onnx::dev::narrow(p.eb(), &qkv, 2, sizes[0] + sizes[1], sizes[2])?;
    let (q4, k4, v4) = (split_heads(p, &q, heads)?, split_heads(p, &k, heads)?, split_heads(p, &v, heads)?);
    let (bsz, sq, skv) = (q4.shape[0], q4.shape[2], k4.shape[2]);
    let mut bias: Option<Dev> = None;
    if let Some(m) = opt(ins, 3) {
        ensure!(m.shape().len() == 2, "Attention's mask_index is supported as a [batch, sequence] 0/1 mask");
        let d = p.dev(m)?;
        let d = reshape(p.eb(), &d, vec![bsz, 1, 1, skv])?;
        let ninf = neg_inf_scalar(p, elem)?;
        bias = Some(binary(p.eb(), BinFn::MaskNot, &ninf, &d, elem)?);
    }
    if let Some(ab) = opt(ins, 5) {
        let d = p.dev(ab)?;
        bias = Some(match bias {
            Some(b) => binary(p.eb(), BinFn::Add, &b, &d, elem)?,
            None => d,
        });
    }
    if n.int("unidirectional", 0) != 0 {
        if let Some(sb) = structure_bias(sq, skv, true, 0, -1, -1)? {
            let sd = p.upload_host(&sb, None, DType::F32)?;
            bias = Some(match bias {
                Some(b) => binary(p.eb(), BinFn::Add, &b, &sd, elem)?,
                None => sd,
            });
        }
    }
    let scale = if n.has("scale") && n.float("scale", 0.0) != 0.0 { n.float("scale", 1.0) } else { 1.0 / (q4.shape[3] as f32).sqrt() };
    let (y, _) = attend(p, &q4, &k4, &v4, bias, scale, 0.0, 0)?;
    Ok(vec![Val::D(merge_heads(p, &y)?)])
}
