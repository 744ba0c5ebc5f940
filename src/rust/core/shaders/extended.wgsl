// The engine's extended ops (src/rust/core/src/op/extended.rs), one
// variant per op (OPC): 0 map, 1 binary, 2 gather_axis, 3 pad_ex,
// 4 scatter_flat, 5 reduce_rows, 6 scan_rows. Function codes are their
// position in MapFn::ALL / BinFn::ALL / RowFn::ALL (word 49); float
// parameters in words 50 and 51; gather's dim in 56; pad_ex's lo sizes in
// 56..59, mode in 60; scan flags (exclusive, reverse) in 57, 58.
// Maps, binaries, gathers, pads and scatters give each result element an
// invocation; reductions and scans give each row one.

fn is_int_val(y: f32) -> bool { return y == trunc(y); }

// x^y as C's powf for the cases models meet (negative bases with integer
// exponents keep their sign).
fn powf(x: f32, y: f32) -> f32 {
    if (y == 0.0) { return 1.0; }
    if (x == 0.0) {
        if (y > 0.0) { return 0.0; }
        return bitcast<f32>(0x7f800000u);
    }
    if (x < 0.0) {
        if (!is_int_val(y)) { return bitcast<f32>(0x7fc00000u); }
        let m = pow(-x, y);
        if (is_int_val(y * 0.5)) { return m; }
        return -m;
    }
    return pow(x, y);
}

fn erf_f(x: f32) -> f32 {
    let t0 = abs(x);
    if (t0 < 0.5) {
        let x2 = x * x;
        var term = x;
        var sum = x;
        for (var n = 1; n < 12; n = n + 1) {
            term = term * (-x2 / f32(n));
            sum = sum + term / f32(2 * n + 1);
        }
        return sum * 1.1283791670955126;
    }
    let z = 1.0 / (1.0 + 0.5 * t0);
    let poly = -t0 * t0 - 1.26551223 + z * (1.00002368 + z * (0.37409196 + z * (0.09678418 + z * (-0.18628806
        + z * (0.27886807 + z * (-1.13520398 + z * (1.48851587 + z * (-0.82215223 + z * 0.17087277))))))));
    let r = 1.0 - z * exp(poly);
    if (x < 0.0) { return -r; }
    return r;
}

// log(1 + y) without the cancellation of small y.
fn log1p_f(y: f32) -> f32 {
    if (abs(y) < 1e-3) { return y * (1.0 - y * (0.5 - y / 3.0)); }
    return log(1.0 + y);
}

fn tanh_f(x: f32) -> f32 {
    if (abs(x) < 0.05) {
        let x2 = x * x;
        return x * (1.0 - x2 / 3.0 + 2.0 * x2 * x2 / 15.0);
    }
    return tanh(x);
}

fn softplus_f(x: f32) -> f32 {
    if (x > 20.0) { return x; }
    return log1p_f(exp(x));
}

fn nan_f() -> f32 { return bitcast<f32>(0x7fc00000u); }

// NaN and infinity tests on the bits (a compiler may assume x == x).
fn is_nan(x: f32) -> bool { return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u; }
fn is_inf(x: f32) -> bool { return (bitcast<u32>(x) & 0x7fffffffu) == 0x7f800000u; }

// C's fmod.
fn fmod_f(a: f32, b: f32) -> f32 {
    if (is_inf(b) && !is_inf(a) && !is_nan(a)) { return a; }
    return a - b * trunc(a / b);
}

fn to_bf16(v: f32) -> f32 {
    let b = bitcast<u32>(v);
    if ((b & 0x7fffffffu) > 0x7f800000u) { return v; }
    return bitcast<f32>(((b + 0x7fffu + ((b >> 16u) & 1u)) >> 16u) << 16u);
}

// asin and acos through atan2 (the drivers' own asin can be off by 1e-4);
// NaN outside [-1, 1].
fn asin_f(x: f32) -> f32 {
    if (abs(x) > 1.0) { return bitcast<f32>(0x7fc00000u); }
    return atan2(x, sqrt((1.0 - x) * (1.0 + x)));
}

fn acos_f(x: f32) -> f32 {
    if (abs(x) > 1.0) { return bitcast<f32>(0x7fc00000u); }
    return atan2(sqrt((1.0 - x) * (1.0 + x)), x);
}

fn map_f(code: u32, x: f32, a: f32, b: f32) -> f32 {
    switch code {
        case 0u: { return floor(x); }
        case 1u: { return ceil(x); }
        case 2u: { return round(x); }
        case 3u: { return trunc(x); }
        case 4u: { return sign(x); }
        case 5u: { return 1.0 / x; }
        case 6u: { return erf_f(x); }
        case 7u: { return tan(x); }
        case 8u: { return asin_f(x); }
        case 9u: { return acos_f(x); }
        case 10u: { return atan(x); }
        case 11u: { return sinh(x); }
        case 12u: { return cosh(x); }
        case 13u: { return asinh(x); }
        case 14u: { return acosh(x); }
        case 15u: { return atanh(x); }
        case 16u: { return softplus_f(x); }
        case 17u: { return x / (1.0 + abs(x)); }
        case 18u: { return x * tanh_f(softplus_f(x)); }
        case 19u: { return 0.5 * x * (1.0 + erf_f(x * 0.70710678)); }
        case 20u: { return x / (1.0 + exp(-a * x)); }
        case 21u: {
            if (x > 0.0) { return b * x; }
            return b * a * (exp(x) - 1.0);
        }
        case 22u: { return max(x, 0.0) + min(0.0, a * (exp(x / a) - 1.0)); }
        case 23u: {
            if (x > 0.0) { return x; }
            return a * (exp(x) - 1.0);
        }
        case 24u: { return select(0.0, x, x > a); }
        case 25u: { return clamp(a * x + b, 0.0, 1.0); }
        case 26u: {
            if (x < -b) { return x + a; }
            if (x > b) { return x - a; }
            return 0.0;
        }
        case 27u: { return select(0.0, 1.0, x == 0.0); }
        case 28u: { return select(0.0, 1.0, x != 0.0); }
        case 29u: { return select(0.0, 1.0, is_nan(x)); }
        case 30u: {
            let inf = bitcast<f32>(0x7f800000u);
            return select(0.0, 1.0, (x == inf && a != 0.0) || (x == -inf && b != 0.0));
        }
        case 31u: { return powf(x, a); }
        case 32u: { return a * x + b; }
        case 33u: { return clamp(round(x), a, b); }
        case 34u: { return unpack2x16float(pack2x16float(vec2<f32>(x, 0.0))).x; }
        case 35u: { return to_bf16(x); }
        default: { return x; }
    }
}

fn bin_f(code: u32, a: f32, b: f32) -> f32 {
    switch code {
        case 0u: { return a + b; }
        case 1u: { return a - b; }
        case 2u: { return a * b; }
        case 3u: { return a / b; }
        case 4u: { return powf(a, b); }
        case 5u: {
            if (is_nan(a) || is_nan(b)) { return nan_f(); }
            return max(a, b);
        }
        case 6u: {
            if (is_nan(a) || is_nan(b)) { return nan_f(); }
            return min(a, b);
        }
        case 7u: { return fmod_f(a, b); }
        case 8u: {
            let r = fmod_f(a, b);
            if (r != 0.0 && ((r < 0.0) != (b < 0.0))) { return r + b; }
            return r;
        }
        case 9u: { return select(0.0, 1.0, a == b); }
        case 10u: { return select(0.0, 1.0, a < b); }
        case 11u: { return select(0.0, 1.0, a <= b); }
        case 12u: { return select(0.0, 1.0, a > b); }
        case 13u: { return select(0.0, 1.0, a >= b); }
        case 14u: { return select(0.0, 1.0, a != 0.0 && b != 0.0); }
        case 15u: { return select(0.0, 1.0, a != 0.0 || b != 0.0); }
        case 16u: { return select(0.0, 1.0, (a != 0.0) != (b != 0.0)); }
        case 17u: { return select(a, a * b, a < 0.0); }
        case 18u: { return select(0.0, a, b != 0.0); }
        case 19u: { return select(0.0, a, b == 0.0); }
        default: { return trunc(a / b); }
    }
}

fn bcast(t: u32, c: vec4<u32>) -> vec4<u32> {
    return c % vec4<u32>(ne(t, 0u), ne(t, 1u), ne(t, 2u), ne(t, 3u));
}

// Position of index value v in a dimension of size n, or -1 when outside.
fn position(v: f32, n: u32) -> i32 {
    var i = i32(round(v));
    if (i < 0) { i = i + i32(n); }
    if (i < 0 || u32(i) >= n) { return -1; }
    return i;
}

fn pad_source(o: u32, lo: u32, n: u32, mode: u32) -> i32 {
    let i = i32(o) - i32(lo);
    let ni = i32(n);
    if (i >= 0 && i < ni) { return i; }
    if (mode == 0u) { return -1; }
    if (mode == 2u) { return clamp(i, 0, ni - 1); }
    if (mode == 3u) { return ((i % ni) + ni) % ni; }
    if (ni == 1) { return 0; }
    let p = 2 * (ni - 1);
    let m = ((i % p) + p) % p;
    return select(p - m, m, m < ni);
}

fn element(i: u32) {
    let c = coords(2u, i);
    let de = idx(2u, c);
    switch OPC {
        case 0u: { st(de, map_f(P[49u], ld0(idx(0u, c)), pf(50u), pf(51u))); }
        case 1u: { st(de, bin_f(P[49u], ld0(idx(0u, bcast(0u, c))), ld1(idx(1u, bcast(1u, c))))); }
        case 2u: {
            let dim = P[56u];
            let p = position(ld1(idx(1u, vec4<u32>(c[dim], 0u, 0u, 0u))), ne(0u, dim));
            if (p < 0) {
                st(de, 0.0);
            } else {
                var cc = c;
                cc[dim] = u32(p);
                st(de, ld0(idx(0u, cc)));
            }
        }
        case 3u: {
            var cc = vec4<u32>(0u);
            var inside = true;
            for (var d = 0u; d < 4u; d = d + 1u) {
                let s = pad_source(c[d], P[56u + d], ne(0u, d), P[60u]);
                if (s < 0) { inside = false; } else { cc[d] = u32(s); }
            }
            if (inside) { st(de, ld0(idx(0u, cc))); } else { st(de, pf(50u)); }
        }
        case 4u: {
            var v = ld0(idx(0u, c));
            let n = ne(1u, 1u);
            let red = P[49u];
            for (var j = 0u; j < n; j = j + 1u) {
                let f = ld1(idx(1u, vec4<u32>(0u, j, 0u, 0u)));
                if (f > -0.5 && position(f, nel(2u)) == i32(i)) {
                    let u = ld1(idx(1u, vec4<u32>(1u, j, 0u, 0u)));
                    switch red {
                        case 0u: { v = u; }
                        case 1u: { v = v + u; }
                        case 2u: { v = v * u; }
                        case 3u: { v = max(v, u); }
                        default: { v = min(v, u); }
                    }
                }
            }
            st(de, v);
        }
        default: {}
    }
}

// Reduction of row r of source 0 by RowFn code `code`.
fn reduce_row(code: u32, r: vec4<u32>) -> f32 {
    let n = ne(0u, 0u);
    var acc = 0.0;
    var comp = 0.0;
    var best = 0u;
    var bv = 0.0;
    var m = bitcast<f32>(0xff800000u);
    if (code == 3u) { m = bitcast<f32>(0x7f800000u); }
    if (code == 4u) { acc = 1.0; }
    if (code == 9u) {
        for (var k = 0u; k < n; k = k + 1u) { m = max(m, ld0(idx(0u, vec4<u32>(k, r.y, r.z, r.w)))); }
        if (abs(m) == bitcast<f32>(0x7f800000u)) { return m; }
    }
    for (var k = 0u; k < n; k = k + 1u) {
        let x = ld0(idx(0u, vec4<u32>(k, r.y, r.z, r.w)));
        if (code == 2u) {
            if (x > m || is_nan(x)) { m = x; }
        } else if (code == 3u) {
            if (x < m || is_nan(x)) { m = x; }
        } else if (code == 4u) {
            acc = acc * x;
        } else if (code >= 10u) {
            let better = (code == 10u && x > bv) || (code == 11u && x < bv)
                || (code == 12u && x >= bv) || (code == 13u && x <= bv);
            if (k == 0u || better) {
                bv = x;
                best = k;
            }
        } else {
            var t = x;
            if (code == 5u || code == 7u) { t = x * x; }
            if (code == 6u) { t = abs(x); }
            if (code == 9u) { t = exp(x - m); }
            // Compensated sum.
            let y = t - comp;
            let s = acc + y;
            comp = (s - acc) - y;
            acc = s;
        }
    }
    switch code {
        case 1u: { return acc / f32(max(n, 1u)); }
        case 2u, 3u: { return m; }
        case 7u: { return sqrt(acc); }
        case 8u: { return log(acc); }
        case 9u: { return m + log(acc); }
        case 10u, 11u, 12u, 13u: { return f32(best); }
        default: { return acc; }
    }
}

fn scan_row(code: u32, r: vec4<u32>) {
    let n = ne(0u, 0u);
    if (code == 0u || code == 3u) {
        var m = bitcast<f32>(0xff800000u);
        var best = 0u;
        for (var k = 0u; k < n; k = k + 1u) {
            let x = ld0(idx(0u, vec4<u32>(k, r.y, r.z, r.w)));
            if (x > m) { best = k; }
            m = max(m, x);
        }
        var s = 0.0;
        for (var k = 0u; k < n; k = k + 1u) { s = s + exp(ld0(idx(0u, vec4<u32>(k, r.y, r.z, r.w))) - m); }
        let l = log(s);
        for (var k = 0u; k < n; k = k + 1u) {
            let c = vec4<u32>(k, r.y, r.z, r.w);
            if (code == 0u) {
                st(idx(2u, c), ld0(idx(0u, c)) - m - l);
            } else {
                st(idx(2u, c), select(0.0, 1.0, k == best));
            }
        }
        return;
    }
    let prod = code == 2u;
    let exclusive = P[57u] != 0u;
    let reverse = P[58u] != 0u;
    var acc = select(0.0, 1.0, prod);
    for (var j = 0u; j < n; j = j + 1u) {
        var k = j;
        if (reverse) { k = n - 1u - j; }
        let c = vec4<u32>(k, r.y, r.z, r.w);
        let x = ld0(idx(0u, c));
        if (exclusive) { st(idx(2u, c), acc); }
        if (prod) { acc = acc * x; } else { acc = acc + x; }
        if (!exclusive) { st(idx(2u, c), acc); }
    }
}

@compute @workgroup_size(256, 1, 1)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    // The whole dispatch's grid, also when this is a piece of it.
    let nwg = grid();
    let stride = nwg.x * 256u;
    if (OPC == 5u || OPC == 6u) {
        let rows = ne(0u, 1u) * ne(0u, 2u) * ne(0u, 3u);
        for (var i = gid.x; i < rows; i = i + stride) {
            let rc = coords(0u, i * ne(0u, 0u));
            if (OPC == 5u) {
                st(idx(2u, vec4<u32>(0u, rc.y, rc.z, rc.w)), reduce_row(P[49u], rc));
            } else {
                scan_row(P[49u], rc);
            }
        }
        return;
    }
    let n = nel(2u);
    for (var i = gid.x; i < n; i = i + stride) {
        element(i);
    }
}
