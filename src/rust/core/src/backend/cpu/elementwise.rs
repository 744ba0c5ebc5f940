//! Element-wise kernels: maps of one tensor, and binary ops with ggml's
//! broadcasting of the second operand (each size of b divides a's).

use super::access::Src;
use super::par::{par_rows, CpuPool};
use crate::base::float::Float;
use crate::op::{Op, UnaryOp};

/// out[i] = f(a[i]).
// BOUNDS-FN: a holds as many values as out: each caller's op keeps the shape
// (Scale, Unary, LeakyRelu, Clamp, Add1: `same` in op/shape.rs; the maps of
// op/extended_shape.rs), and a is gathered contiguous; par_rows's chunks of
// 1024 start at r0 * 1024 and end by out.len().
pub fn map<T: Float>(a: &Src<'_, T>, out: &mut [T], pool: &CpuPool, f: impl Fn(T) -> T + Sync + Send) {
    let x = &a.d;
    par_rows(pool, out, 1024, |r0, chunk| {
        let start = r0 * 1024;
        let n = chunk.len();
        // Compiled wide: the maps of the vector math functions vectorise 8 lanes wide.
        crate::base::vmath::wide(|| {
            for (o, v) in chunk.iter_mut().zip(&x[start..start + n]) {
                *o = f(*v);
            }
        })
    });
}

/// out[i] = u(a[i]), one loop compiled per function (so that each
/// vectorises where it can, instead of choosing the function per element).
pub fn unary<T: Float>(u: UnaryOp, a: &Src<'_, T>, out: &mut [T], pool: &CpuPool) {
    macro_rules! each {
        ($($v:ident),*) => {
            match u {
                $(UnaryOp::$v => map(a, out, pool, |x| UnaryOp::$v.apply(x)),)*
            }
        };
    }
    each!(
        Neg, Abs, Sqr, Sqrt, Exp, Log, Sin, Cos, Relu, Gelu, Silu, Sigmoid, Tanh, Elu, Step, Hardswish, Hardsigmoid, Sgn, Ceil,
        Floor, Round, Softplus, GeluErf, GeluQuick
    )
}

/// out[i] = f(a[i], b[i]) for a and b of one shape.
// BOUNDS-FN: a, b and out hold the same number of values: the Glu rule
// (op/glu.rs, split form) and `infer_silu_back` require a.ne == b.ne and give
// out that shape; chunks as in `map`.
pub fn zip<T: Float>(a: &Src<'_, T>, b: &Src<'_, T>, out: &mut [T], pool: &CpuPool, f: impl Fn(T, T) -> T + Sync + Send) {
    let (x, y) = (&a.d, &b.d);
    par_rows(pool, out, 1024, |r0, chunk| {
        let start = r0 * 1024;
        let n = chunk.len();
        for ((o, u), v) in chunk.iter_mut().zip(&x[start..start + n]).zip(&y[start..start + n]) {
            *o = f(*u, *v);
        }
    });
}

// BOUNDS-FN: b[0] is read when b.len() == 1, b[i % b.len()] when b is neither
// empty nor a's length (the caller's b rows have bn[0] > 0 values: can_repeat).
fn apply_row<T: Float>(op: &Op, a: &[T], b: &[T], out: &mut [T]) {
    // b is either a full row or repeats along the row.
    macro_rules! go {
        ($f:expr) => {{
            let f = $f;
            if b.len() == a.len() {
                for ((o, x), y) in out.iter_mut().zip(a).zip(b) {
                    *o = f(*x, *y);
                }
            } else if b.len() == 1 {
                let y = b[0];
                for (o, x) in out.iter_mut().zip(a) {
                    *o = f(*x, y);
                }
            } else {
                for (i, (o, x)) in out.iter_mut().zip(a).enumerate() {
                    *o = f(*x, b[i % b.len()]);
                }
            }
        }};
    }
    match op {
        Op::Add => go!(|x: T, y: T| x + y),
        Op::Sub => go!(|x: T, y: T| x - y),
        Op::Mul => go!(|x: T, y: T| x * y),
        Op::Div => go!(|x: T, y: T| x / y),
        // INVARIANT: binary() is only called for Add/Sub/Mul/Div (driver.rs
        // dispatches exactly those four here).
        _ => unreachable!("not a binary op"),
    }
}

/// out = a (op) b, b broadcast to a's shape.
// BOUNDS-FN: the Add/Sub/Mul/Div rule (op/shape.rs) requires can_repeat(b, a):
// every size of b is above 0 and divides a's, and out has a's shape; a and b
// are gathered contiguous. Row r < n1 n2 n3 of out is row r of a, and br, the
// row of b it reads, is below bn[1] bn[2] bn[3]; bn is a [usize; 4] indexed by
// literals.
pub fn binary<T: Float>(op: &Op, a: &Src<'_, T>, b: &Src<'_, T>, out: &mut [T], pool: &CpuPool) {
    let [n0, n1, n2, _] = a.ne;
    let bn = b.ne;
    par_rows(pool, out, n0, |r0, chunk| {
        for (k, orow) in chunk.chunks_mut(n0.max(1)).enumerate() {
            let r = r0 + k;
            let (i1, i2, i3) = (r % n1, (r / n1) % n2, r / (n1 * n2));
            let arow = &a.d[r * n0..(r + 1) * n0];
            let br = (i1 % bn[1]) + bn[1] * ((i2 % bn[2]) + bn[2] * (i3 % bn[3]));
            let brow = &b.d[br * bn[0]..(br + 1) * bn[0]];
            apply_row(op, arow, brow, orow);
        }
    });
}

/// out = g * u'(at the input that gave y), from the output y (`UnaryBack`).
// BOUNDS-FN: the UnaryBack rule (op/shape.rs) requires g.ne == y.ne and gives
// out that shape; chunks as in `map`.
pub fn unary_back<T: Float>(u: UnaryOp, g: &Src<'_, T>, y: &Src<'_, T>, out: &mut [T], pool: &CpuPool) {
    // BOUNDS-FN: g, y and out hold the same number of values (see above).
    fn each<T: Float>(g: &[T], y: &[T], out: &mut [T], pool: &CpuPool, f: impl Fn(T, T) -> T + Sync + Send) {
        par_rows(pool, out, 1024, |r0, chunk| {
            let start = r0 * 1024;
            let n = chunk.len();
            for ((o, &gv), &yv) in chunk.iter_mut().zip(&g[start..start + n]).zip(&y[start..start + n]) {
                *o = f(gv, yv);
            }
        })
    }
    let (g, y) = (&g.d[..], &y.d[..]);
    match u {
        UnaryOp::Relu => each(g, y, out, pool, |g, y| if y > T::ZERO { g } else { T::ZERO }),
        UnaryOp::Sigmoid => each(g, y, out, pool, |g, y| g * (y - y * y)),
        _ => each(g, y, out, pool, |g, y| g - g * (y * y)),
    }
}
