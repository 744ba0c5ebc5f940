//! Element-wise operators: math functions and activations of one input,
//! arithmetic, comparisons and logic of two (numpy broadcasting), the
//! variadic Sum / Mean / Max / Min, Where, Clip, Cast and the identities.

use super::common::{arg, harg, hopt, one, opt, Fold, Lower};
use crate::models::onnx::dev::{binary, unary};
use crate::models::onnx::elem::Elem;
use crate::models::onnx::host::{broadcast_index, broadcast_shape, wrap_int, Data, HTensor};
use crate::models::onnx::model::OnnxNode;
use crate::models::onnx::plan::Planner;
use crate::models::onnx::val::{Dev, Val};
use crate::op::{BinFn, MapFn, Op, UnaryOp};
use anyhow::{bail, ensure};
use std::sync::Arc;

pub fn find(op: &str) -> Option<(Option<Lower>, Option<Fold>)> {
    let unary_op = unary_spec(op, &OnnxNode::empty()).is_some();
    if unary_op {
        return Some((Some(lower_unary), Some(fold_unary)));
    }
    if bin_fn(op).is_some() {
        return Some((Some(lower_binary), Some(fold_binary)));
    }
    Some(match op {
        "Sum" | "Mean" | "Max" | "Min" => (Some(lower_variadic), Some(fold_variadic)),
        "Where" => (Some(lower_where), Some(fold_where)),
        "Clip" => (Some(lower_clip), Some(fold_clip)),
        "Cast" | "CastLike" => (Some(lower_cast), Some(fold_cast)),
        "Identity" | "Dropout" => (Some(lower_identity), Some(fold_identity)),
        "BitwiseAnd" | "BitwiseOr" | "BitwiseXor" | "BitwiseNot" | "BitShift" => (None, Some(fold_bitwise)),
        _ => return None,
    })
}

impl OnnxNode {
    /// A node with no attributes (for looking operators up by type).
    pub fn empty() -> OnnxNode {
        OnnxNode {
            name: String::new(),
            op: String::new(),
            domain: String::new(),
            inputs: Vec::new(),
            outputs: Vec::new(),
            attrs: Default::default(),
        }
    }
}

/// How a one-input function is computed: on the engine and on the host.
#[derive(Clone)]
struct Spec {
    op: Op,
    /// Keeps integer inputs integer (Abs, Neg, Sign, Relu...).
    keeps_ints: bool,
    /// The result is boolean (Not, IsNaN, IsInf).
    boolean: bool,
}

fn map(f: MapFn, a: f32, b: f32) -> Op {
    Op::Map { f, a, b }
}

fn unary_spec(op: &str, n: &OnnxNode) -> Option<Spec> {
    let u = |x: UnaryOp| Op::Unary(x);
    let (op, keeps_ints, boolean) = match op {
        "Abs" => (u(UnaryOp::Abs), true, false),
        "Neg" => (u(UnaryOp::Neg), true, false),
        "Sqrt" => (u(UnaryOp::Sqrt), false, false),
        "Exp" => (u(UnaryOp::Exp), false, false),
        "Log" => (u(UnaryOp::Log), false, false),
        "Sin" => (u(UnaryOp::Sin), false, false),
        "Cos" => (u(UnaryOp::Cos), false, false),
        "Tanh" => (u(UnaryOp::Tanh), false, false),
        "Sigmoid" => (u(UnaryOp::Sigmoid), false, false),
        "Relu" => (u(UnaryOp::Relu), true, false),
        "Silu" => (u(UnaryOp::Silu), false, false),
        "HardSwish" => (u(UnaryOp::Hardswish), false, false),
        "Tan" => (map(MapFn::Tan, 0.0, 0.0), false, false),
        "Asin" => (map(MapFn::Asin, 0.0, 0.0), false, false),
        "Acos" => (map(MapFn::Acos, 0.0, 0.0), false, false),
        "Atan" => (map(MapFn::Atan, 0.0, 0.0), false, false),
        "Sinh" => (map(MapFn::Sinh, 0.0, 0.0), false, false),
        "Cosh" => (map(MapFn::Cosh, 0.0, 0.0), false, false),
        "Asinh" => (map(MapFn::Asinh, 0.0, 0.0), false, false),
        "Acosh" => (map(MapFn::Acosh, 0.0, 0.0), false, false),
        "Atanh" => (map(MapFn::Atanh, 0.0, 0.0), false, false),
        "Erf" => (map(MapFn::Erf, 0.0, 0.0), false, false),
        "Floor" => (map(MapFn::Floor, 0.0, 0.0), true, false),
        "Ceil" => (map(MapFn::Ceil, 0.0, 0.0), true, false),
        "Round" => (map(MapFn::Round, 0.0, 0.0), true, false),
        "Sign" => (map(MapFn::Sign, 0.0, 0.0), true, false),
        "Reciprocal" => (map(MapFn::Reciprocal, 0.0, 0.0), false, false),
        "Softplus" => (map(MapFn::Softplus, 0.0, 0.0), false, false),
        "Softsign" => (map(MapFn::Softsign, 0.0, 0.0), false, false),
        "Mish" => (map(MapFn::Mish, 0.0, 0.0), false, false),
        "Elu" => (map(MapFn::EluA, n.float("alpha", 1.0), 0.0), false, false),
        "Celu" => (map(MapFn::Celu, n.float("alpha", 1.0), 0.0), false, false),
        "Selu" => (
            map(MapFn::Selu, n.float("alpha", 1.673_263_2), n.float("gamma", 1.050_701)),
            false,
            false,
        ),
        "LeakyRelu" => (Op::LeakyRelu { slope: n.float("alpha", 0.01) }, false, false),
        "ThresholdedRelu" => (map(MapFn::ThresholdedRelu, n.float("alpha", 1.0), 0.0), false, false),
        "HardSigmoid" => (map(MapFn::HardSigmoidAB, n.float("alpha", 0.2), n.float("beta", 0.5)), false, false),
        "Shrink" => (map(MapFn::Shrink, n.float("bias", 0.0), n.float("lambd", 0.5)), true, false),
        "Swish" => (map(MapFn::Swish, n.float("alpha", 1.0), 0.0), false, false),
        "Gelu" => {
            if n.string("approximate", "none") == "tanh" {
                (u(UnaryOp::Gelu), false, false)
            } else {
                (map(MapFn::GeluErf, 0.0, 0.0), false, false)
            }
        }
        "Not" => (map(MapFn::Not, 0.0, 0.0), false, true),
        "IsNaN" => (map(MapFn::IsNaN, 0.0, 0.0), false, true),
        "IsInf" => (
            map(MapFn::IsInf, n.int("detect_positive", 1) as f32, n.int("detect_negative", 1) as f32),
            false,
            true,
        ),
        _ => return None,
    };
    Some(Spec { op, keeps_ints, boolean })
}

fn result_elem(s: &Spec, input: Elem) -> Elem {
    if s.boolean {
        Elem::Bool
    } else if input.is_float() || s.keeps_ints {
        input
    } else {
        Elem::F32
    }
}

/// The host value of an engine op of one source (f32 semantics, as the engine).
fn host_apply(op: &Op, x: f64) -> f64 {
    let x32 = x as f32;
    (match op {
        Op::Unary(u) => u.apply(x32),
        Op::Map { f, a, b } => f.apply(x32, *a, *b),
        Op::LeakyRelu { slope } => {
            if x32 > 0.0 {
                x32
            } else {
                slope * x32
            }
        }
        Op::Clamp { min, max } => x32.max(*min as f32).min(*max as f32),
        _ => x32,
    }) as f64
}

fn lower_unary(p: &mut Planner, n: &OnnxNode, ins: &[Option<Val>]) -> crate::Result<Vec<Val>> {
    // INVARIANT: registered only for operators unary_spec() knows.
    let s = unary_spec(&n.op, n).expect("a unary operator");
    let x = p.dev(arg(ins, 0, "X")?)?;
    let elem = result_elem(&s, x.elem);
    one(unary(p.eb(), s.op, &x, elem)?)
}

fn fold_unary(n: &OnnxNode, ins: &[Option<Arc<HTensor>>], _opset: i64) -> crate::Result<Vec<HTensor>> {
    // INVARIANT: registered only for operators unary_spec() knows.
    let s = unary_spec(&n.op, n).expect("a unary operator");
    let x = harg(ins, 0, "X")?;
    let elem = result_elem(&s, x.elem);
    let data = match (&x.data, elem.is_float()) {
        (Data::I(v), false) if !s.boolean => Data::I(
            v.iter()
                .map(|&i| match n.op.as_str() {
                    "Abs" => i.wrapping_abs(),
                    "Neg" => i.wrapping_neg(),
                    "Sign" => i.signum(),
                    "Relu" => i.max(0),
                    _ => i,
                })
                .collect(),
        ),
        _ => {
            let v = x.f64s();
            let exact = |f: fn(f64) -> f64| Data::F(v.iter().map(|&t| f(t)).collect());
            match n.op.as_str() {
                // f64 on the host where it is exact and cheap.
                "Abs" if elem.is_float() => exact(f64::abs),
                "Neg" if elem.is_float() => exact(|t| -t),
                "Sqrt" => exact(f64::sqrt),
                "Exp" => exact(f64::exp),
                "Log" => exact(f64::ln),
                "Floor" if elem.is_float() => exact(f64::floor),
                "Ceil" if elem.is_float() => exact(f64::ceil),
                _ => {
                    let r: Vec<f64> = v.iter().map(|&t| host_apply(&s.op, t)).collect();
                    if elem.is_float() {
                        Data::F(r)
                    } else {
                        Data::I(r.iter().map(|&t| t as i64).collect())
                    }
                }
            }
        }
    };
    Ok(vec![HTensor { elem, shape: x.shape.clone(), data }])
}

/// The engine function of a binary operator.
fn bin_fn(op: &str) -> Option<BinFn> {
    Some(match op {
        "Add" => BinFn::Add,
        "Sub" => BinFn::Sub,
        "Mul" => BinFn::Mul,
        "Div" => BinFn::Div,
        "Pow" => BinFn::Pow,
        "Mod" => BinFn::Mod,
        "Equal" => BinFn::Equal,
        "Less" => BinFn::Less,
        "LessOrEqual" => BinFn::LessEq,
        "Greater" => BinFn::Greater,
        "GreaterOrEqual" => BinFn::GreaterEq,
        "And" => BinFn::And,
        "Or" => BinFn::Or,
        "Xor" => BinFn::Xor,
        "PRelu" => BinFn::PRelu,
        _ => return None,
    })
}

fn is_compare(f: BinFn) -> bool {
    matches!(
        f,
        BinFn::Equal | BinFn::Less | BinFn::LessEq | BinFn::Greater | BinFn::GreaterEq | BinFn::And | BinFn::Or | BinFn::Xor
    )
}

/// The function for node `n` given its input type (integer division
/// truncates; Mod's `fmod` attribute).
fn node_fn(n: &OnnxNode, elem: Elem) -> BinFn {
    // INVARIANT: called only for operators bin_fn() knows.
    let f = bin_fn(&n.op).expect("a binary operator");
    match f {
        BinFn::Div if !elem.is_float() => BinFn::DivTrunc,
        BinFn::Mod if n.int("fmod", 0) != 0 => BinFn::Fmod,
        _ => f,
    }
}

fn lower_binary(p: &mut Planner, n: &OnnxNode, ins: &[Option<Val>]) -> crate::Result<Vec<Val>> {
    let (a, b) = (arg(ins, 0, "A")?, arg(ins, 1, "B")?);
    let f = node_fn(n, a.elem());
    let elem = if is_compare(f) { Elem::Bool } else { a.elem() };
    let (x, y) = (p.dev(a)?, p.dev(b)?);
    one(binary(p.eb(), f, &x, &y, elem)?)
}

// BOUNDS-FN: ia and ib index a's and b's values (broadcast_index of the shapes they
// broadcast from; an HTensor holds numel(shape) values).
fn host_binary(f: BinFn, a: &HTensor, b: &HTensor, elem: Elem) -> crate::Result<HTensor> {
    let shape = broadcast_shape(&a.shape, &b.shape)?;
    let ia = broadcast_index(&shape, &a.shape)?;
    let ib = broadcast_index(&shape, &b.shape)?;
    let data = match (&a.data, &b.data) {
        (Data::I(x), Data::I(y)) if !elem.is_float() => {
            let g = |p: i64, q: i64| -> i64 {
                match f {
                    BinFn::Add => p.wrapping_add(q),
                    BinFn::Sub => p.wrapping_sub(q),
                    BinFn::Mul => p.wrapping_mul(q),
                    BinFn::DivTrunc | BinFn::Div => {
                        if q == 0 {
                            0
                        } else {
                            p.wrapping_div(q)
                        }
                    }
                    BinFn::Fmod => {
                        if q == 0 {
                            0
                        } else {
                            p.wrapping_rem(q)
                        }
                    }
                    BinFn::Mod => {
                        if q == 0 {
                            0
                        } else {
                            let r = p.wrapping_rem(q);
                            if r != 0 && (r < 0) != (q < 0) {
                                r + q
                            } else {
                                r
                            }
                        }
                    }
                    BinFn::Pow => {
                        if q < 0 {
                            (p as f64).powf(q as f64) as i64
                        } else {
                            p.wrapping_pow(q.min(u32::MAX as i64) as u32)
                        }
                    }
                    BinFn::Max => p.max(q),
                    BinFn::Min => p.min(q),
                    BinFn::PRelu => {
                        if p < 0 {
                            p * q
                        } else {
                            p
                        }
                    }
                    other => other.apply(p as f32, q as f32) as i64,
                }
            };
            let cmp = |p: i64, q: i64| -> i64 {
                (match f {
                    BinFn::Equal => p == q,
                    BinFn::Less => p < q,
                    BinFn::LessEq => p <= q,
                    BinFn::Greater => p > q,
                    BinFn::GreaterEq => p >= q,
                    BinFn::And => p != 0 && q != 0,
                    BinFn::Or => p != 0 || q != 0,
                    _ => (p != 0) != (q != 0),
                }) as i64
            };
            let v: Vec<i64> = if is_compare(f) {
                ia.iter().zip(&ib).map(|(&i, &j)| cmp(x[i], y[j])).collect()
            } else {
                ia.iter().zip(&ib).map(|(&i, &j)| wrap_int(elem, g(x[i], y[j]))).collect()
            };
            Data::I(v)
        }
        _ => {
            let (x, y) = (a.f64s(), b.f64s());
            let g = |p: f64, q: f64| -> f64 {
                match f {
                    BinFn::Add => p + q,
                    BinFn::Sub => p - q,
                    BinFn::Mul => p * q,
                    BinFn::Div => p / q,
                    BinFn::Pow => p.powf(q),
                    BinFn::Fmod => p % q,
                    BinFn::Equal => (p == q) as i64 as f64,
                    BinFn::Less => (p < q) as i64 as f64,
                    BinFn::LessEq => (p <= q) as i64 as f64,
                    BinFn::Greater => (p > q) as i64 as f64,
                    BinFn::GreaterEq => (p >= q) as i64 as f64,
                    other => other.apply(p as f32, q as f32) as f64,
                }
            };
            let v: Vec<f64> = ia.iter().zip(&ib).map(|(&i, &j)| g(x[i], y[j])).collect();
            if elem.is_float() {
                Data::F(v)
            } else {
                Data::I(v.iter().map(|&t| t as i64).collect())
            }
        }
    };
    Ok(HTensor { elem, shape, data })
}

fn fold_binary(n: &OnnxNode, ins: &[Option<Arc<HTensor>>], _opset: i64) -> crate::Result<Vec<HTensor>> {
    let (a, b) = (harg(ins, 0, "A")?, harg(ins, 1, "B")?);
    let f = node_fn(n, a.elem);
    let elem = if is_compare(f) { Elem::Bool } else { a.elem };
    Ok(vec![host_binary(f, a, b, elem)?])
}

fn variadic_fn(op: &str) -> BinFn {
    match op {
        "Sum" | "Mean" => BinFn::Add,
        "Max" => BinFn::Max,
        _ => BinFn::Min,
    }
}

// BOUNDS-FN: vals is checked non-empty.
fn lower_variadic(p: &mut Planner, n: &OnnxNode, ins: &[Option<Val>]) -> crate::Result<Vec<Val>> {
    let vals: Vec<&Val> = ins.iter().flatten().collect();
    ensure!(!vals.is_empty(), "{} needs at least one input", n.op);
    let f = variadic_fn(&n.op);
    let mut acc = p.dev(vals[0])?;
    for v in &vals[1..] {
        let y = p.dev(v)?;
        acc = binary(p.eb(), f, &acc, &y, acc.elem)?;
    }
    if n.op == "Mean" && vals.len() > 1 {
        acc = unary(p.eb(), Op::Scale { s: f64::from(1.0 / vals.len() as f32) }, &acc, acc.elem)?;
    }
    if vals.len() == 1 {
        acc = unary(p.eb(), Op::Cont, &acc, acc.elem)?;
    }
    one(acc)
}

// BOUNDS-FN: vals is checked non-empty.
fn fold_variadic(n: &OnnxNode, ins: &[Option<Arc<HTensor>>], _opset: i64) -> crate::Result<Vec<HTensor>> {
    let vals: Vec<&HTensor> = ins.iter().flatten().map(|v| v.as_ref()).collect();
    ensure!(!vals.is_empty(), "{} needs at least one input", n.op);
    let f = variadic_fn(&n.op);
    let mut acc = vals[0].clone();
    for v in &vals[1..] {
        acc = host_binary(f, &acc, v, acc.elem)?;
    }
    if n.op == "Mean" {
        let k = vals.len() as f64;
        acc = HTensor::from_f64(acc.elem, acc.shape.clone(), acc.f64s().iter().map(|x| x / k).collect())?;
    }
    Ok(vec![acc])
}

fn lower_where(p: &mut Planner, _n: &OnnxNode, ins: &[Option<Val>]) -> crate::Result<Vec<Val>> {
    let c = p.dev(arg(ins, 0, "condition")?)?;
    let x = p.dev(arg(ins, 1, "X")?)?;
    let y = p.dev(arg(ins, 2, "Y")?)?;
    let elem = x.elem;
    // x where c, plus y where not c: each term is exactly zero where the
    // other is chosen, so infinities and NaNs of the other branch vanish.
    let a = binary(p.eb(), BinFn::Mask, &x, &c, elem)?;
    let b = binary(p.eb(), BinFn::MaskNot, &y, &c, elem)?;
    one(binary(p.eb(), BinFn::Add, &a, &b, elem)?)
}

// BOUNDS-FN: ic, ix and iy index c's, x's and y's values (broadcast_index of their
// shapes) and have the output's numel = pick.len() entries.
fn fold_where(_n: &OnnxNode, ins: &[Option<Arc<HTensor>>], _opset: i64) -> crate::Result<Vec<HTensor>> {
    let (c, x, y) = (harg(ins, 0, "condition")?, harg(ins, 1, "X")?, harg(ins, 2, "Y")?);
    let shape = broadcast_shape(&broadcast_shape(&c.shape, &x.shape)?, &y.shape)?;
    let (ic, ix, iy) = (broadcast_index(&shape, &c.shape)?, broadcast_index(&shape, &x.shape)?, broadcast_index(&shape, &y.shape)?);
    let cv = c.f64s();
    let pick: Vec<bool> = ic.iter().map(|&i| cv[i] != 0.0).collect();
    let data = match (&x.data, &y.data) {
        (Data::I(a), Data::I(b)) => Data::I((0..pick.len()).map(|k| if pick[k] { a[ix[k]] } else { b[iy[k]] }).collect()),
        _ => {
            let (a, b) = (x.f64s(), y.f64s());
            Data::F((0..pick.len()).map(|k| if pick[k] { a[ix[k]] } else { b[iy[k]] }).collect())
        }
    };
    Ok(vec![HTensor { elem: x.elem, shape, data }])
}

/// Clip's bounds: attributes before opset 11, optional inputs after.
fn clip_bounds(n: &OnnxNode, min: Option<f64>, max: Option<f64>) -> (f32, f32) {
    let lo = min.map(|v| v as f32).unwrap_or_else(|| n.float("min", f32::NEG_INFINITY));
    let hi = max.map(|v| v as f32).unwrap_or_else(|| n.float("max", f32::INFINITY));
    (lo, hi)
}

fn lower_clip(p: &mut Planner, n: &OnnxNode, ins: &[Option<Val>]) -> crate::Result<Vec<Val>> {
    let x = p.dev(arg(ins, 0, "input")?)?;
    let bound = |v: Option<&Val>| v.and_then(|v| v.konst()).map(|c| c.value().and_then(|t| t.first())).transpose();
    let (lo_c, hi_c) = (bound(opt(ins, 1))?, bound(opt(ins, 2))?);
    let dyn_lo = opt(ins, 1).filter(|v| v.konst().is_none()).cloned();
    let dyn_hi = opt(ins, 2).filter(|v| v.konst().is_none()).cloned();
    let (lo, hi) = clip_bounds(n, lo_c, hi_c);
    let mut y = unary(p.eb(), Op::Clamp { min: f64::from(lo), max: f64::from(hi) }, &x, x.elem)?;
    if let Some(v) = dyn_lo {
        let m = p.dev(&v)?;
        y = binary(p.eb(), BinFn::Max, &y, &m, x.elem)?;
    }
    if let Some(v) = dyn_hi {
        let m = p.dev(&v)?;
        y = binary(p.eb(), BinFn::Min, &y, &m, x.elem)?;
    }
    one(y)
}

fn fold_clip(n: &OnnxNode, ins: &[Option<Arc<HTensor>>], _opset: i64) -> crate::Result<Vec<HTensor>> {
    let x = harg(ins, 0, "input")?;
    let lo = hopt(ins, 1).map(|t| t.first()).transpose()?;
    let hi = hopt(ins, 2).map(|t| t.first()).transpose()?;
    let (lo, hi) = clip_bounds(n, lo, hi);
    let data = match &x.data {
        Data::I(v) => Data::I(
            v.iter()
                .map(|&i| {
                    let mut r = i;
                    if hopt(ins, 1).is_some() || n.has("min") {
                        r = r.max(lo as i64);
                    }
                    if hopt(ins, 2).is_some() || n.has("max") {
                        r = r.min(hi as i64);
                    }
                    r
                })
                .collect(),
        ),
        Data::F(v) => Data::F(v.iter().map(|&t| t.max(lo as f64).min(hi as f64)).collect()),
    };
    Ok(vec![HTensor { elem: x.elem, shape: x.shape.clone(), data }])
}

/// The target type of a Cast (`to`) or CastLike (the second input's type);
/// a Cast without `to` keeps the type.
fn cast_target(n: &OnnxNode, like: Option<Elem>, input: Elem) -> crate::Result<Elem> {
    if n.op == "CastLike" {
        return like.ok_or_else(|| anyhow::anyhow!("CastLike needs its target_type input"));
    }
    if !n.has("to") {
        return Ok(input);
    }
    Elem::from_code(n.int("to", 1) as i32)
}

fn lower_cast(p: &mut Planner, n: &OnnxNode, ins: &[Option<Val>]) -> crate::Result<Vec<Val>> {
    let v = arg(ins, 0, "input")?;
    let to = cast_target(n, opt(ins, 1).map(|t| t.elem()), v.elem())?;
    if to.is_narrow() && !v.elem().is_narrow() {
        // Rounding to float8, float4 or 4- and 2-bit integers is done on
        // the host, on the input's values.
        let h = p.value_of(v, "input of a Cast to a narrow type")?;
        let taint = Planner::taint_of(v);
        return Ok(vec![Val::c(h.cast_sat(to, n.int("saturate", 1) != 0), taint)]);
    }
    let x = p.dev(v)?;
    let y = if to == Elem::Bool {
        unary(p.eb(), Op::Map { f: MapFn::NonZero, a: 0.0, b: 0.0 }, &x, to)?
    } else if !to.is_float() && x.elem.is_float() {
        unary(p.eb(), Op::Map { f: MapFn::Trunc, a: 0.0, b: 0.0 }, &x, to)?
    } else if to == Elem::F16 || to == Elem::BF16 {
        let f = if to == Elem::F16 { MapFn::ToF16 } else { MapFn::ToBF16 };
        unary(p.eb(), Op::Map { f, a: 0.0, b: 0.0 }, &x, to)?
    } else {
        Dev { elem: to, ..x }
    };
    one(y)
}

fn fold_cast(n: &OnnxNode, ins: &[Option<Arc<HTensor>>], _opset: i64) -> crate::Result<Vec<HTensor>> {
    let x = harg(ins, 0, "input")?;
    let to = cast_target(n, hopt(ins, 1).map(|t| t.elem), x.elem)?;
    Ok(vec![x.cast_sat(to, n.int("saturate", 1) != 0)])
}

fn lower_identity(p: &mut Planner, n: &OnnxNode, ins: &[Option<Val>]) -> crate::Result<Vec<Val>> {
    let x = arg(ins, 0, "input")?.clone();
    if n.op == "Dropout" {
        let training = match opt(ins, 2) {
            Some(v) => p.value_of(v, "training_mode")?.first()? != 0.0,
            None => false,
        };
        let ratio = match opt(ins, 1) {
            Some(v) => p.value_of(v, "ratio")?.first()?,
            None => n.float("ratio", 0.5) as f64,
        };
        ensure!(!training || ratio == 0.0, "Dropout in training mode (random masks) is not supported; ggmlR runs models for inference");
    }
    let mut outs = vec![x.clone()];
    if n.op == "Dropout" && n.outputs.len() > 1 {
        let mask = HTensor::from_i64(Elem::Bool, x.shape().to_vec(), vec![1; x.shape().iter().product()])?;
        outs.push(Val::c(mask, crate::models::onnx::val::Taint::Shape));
    }
    Ok(outs)
}

fn fold_identity(n: &OnnxNode, ins: &[Option<Arc<HTensor>>], _opset: i64) -> crate::Result<Vec<HTensor>> {
    let x = harg(ins, 0, "input")?.clone();
    let mut outs = vec![x.clone()];
    if n.op == "Dropout" && n.outputs.len() > 1 {
        outs.push(HTensor::from_i64(Elem::Bool, x.shape.clone(), vec![1; x.numel()])?);
    }
    Ok(outs)
}

// BOUNDS-FN: ia and ib index a's and b's values (broadcast_index of their shapes).
fn fold_bitwise(n: &OnnxNode, ins: &[Option<Arc<HTensor>>], _opset: i64) -> crate::Result<Vec<HTensor>> {
    let a = harg(ins, 0, "A")?;
    ensure!(!a.elem.is_float(), "{} needs integer tensors, not {}", n.op, a.elem.name());
    let bits = |v: i64| -> u64 {
        match a.elem.size() {
            1 => v as u8 as u64,
            2 => v as u16 as u64,
            4 => v as u32 as u64,
            _ => v as u64,
        }
    };
    if n.op == "BitwiseNot" {
        let v = a.i64s().iter().map(|&x| wrap_int(a.elem, !x)).collect();
        return Ok(vec![HTensor::from_i64(a.elem, a.shape.clone(), v)?]);
    }
    let b = harg(ins, 1, "B")?;
    let shape = broadcast_shape(&a.shape, &b.shape)?;
    let (ia, ib) = (broadcast_index(&shape, &a.shape)?, broadcast_index(&shape, &b.shape)?);
    let (x, y) = (a.i64s(), b.i64s());
    let right = n.string("direction", "") == "RIGHT";
    let v: crate::Result<Vec<i64>> = ia
        .iter()
        .zip(&ib)
        .map(|(&i, &j)| {
            let (p, q) = (x[i], y[j]);
            Ok(wrap_int(
                a.elem,
                match n.op.as_str() {
                    "BitwiseAnd" => p & q,
                    "BitwiseOr" => p | q,
                    "BitwiseXor" => p ^ q,
                    _ => {
                        // As numpy: shifts outside 0..width give 0 (or -1
                        // shifting a negative right); right shifts of signed
                        // values are arithmetic.
                        let width = 8 * a.elem.size() as i64;
                        let signed = a.elem.int_range().is_some_and(|r| r.0 < 0);
                        if q < 0 || q >= width {
                            if right && signed && p < 0 {
                                -1
                            } else {
                                0
                            }
                        } else if right {
                            if signed {
                                p >> q
                            } else {
                                (bits(p) >> q) as i64
                            }
                        } else {
                            (bits(p) << q) as i64
                        }
                    }
                },
            ))
        })
        .collect();
    match v {
        Ok(v) => Ok(vec![HTensor::from_i64(a.elem, shape, v)?]),
        Err(e) => bail!("{e}"),
    }
}
