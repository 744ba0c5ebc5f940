// One workgroup per row (grid-stride over rows); variant SUBC 1 (short rows)
// gives each invocation a row of its own instead. The constant OPC: 0 sum_rows,
// 1 mean, 2 soft_max, 3 norm, 4 rms_norm, 5 argmax, 6 sum of all elements.
// soft_max: scale in word 50, ALiBi m0/m1 in 51/52, mask flag in 56, ALiBi
// flag in 57, n_head_log2 in 58. norm / rms_norm: eps in word 50.

var<workgroup> red: array<f32, 256>;
var<workgroup> redi: array<u32, 256>;

fn wg_sum(v: f32, l: u32) -> f32 {
    red[l] = v;
    workgroupBarrier();
    for (var s = 128u; s > 0u; s = s >> 1u) {
        if (l < s) { red[l] = red[l] + red[l + s]; }
        workgroupBarrier();
    }
    let r = red[0];
    workgroupBarrier();
    return r;
}

fn wg_max(v: f32, l: u32) -> f32 {
    red[l] = v;
    workgroupBarrier();
    for (var s = 128u; s > 0u; s = s >> 1u) {
        if (l < s) { red[l] = max(red[l], red[l + s]); }
        workgroupBarrier();
    }
    let r = red[0];
    workgroupBarrier();
    return r;
}

// Index of the first maximum: ties go to the lower index.
fn wg_argmax(v: f32, i: u32, l: u32) -> u32 {
    red[l] = v;
    redi[l] = i;
    workgroupBarrier();
    for (var s = 128u; s > 0u; s = s >> 1u) {
        if (l < s) {
            let o = red[l + s];
            let oi = redi[l + s];
            if (o > red[l] || (o == red[l] && oi < redi[l])) {
                red[l] = o;
                redi[l] = oi;
            }
        }
        workgroupBarrier();
    }
    let r = redi[0];
    workgroupBarrier();
    return r;
}

// Softmax input of element j: x * scale + slope * mask (row bases given).
fn sm_in(j: u32, rb0: u32, mb: u32, slope: f32) -> f32 {
    var v = ld0(rb0 + j * P[6u]) * pf(50u);
    if (P[56u] != 0u) {
        v = v + slope * ld1(mb + j * P[22u]);
    }
    return v;
}

// ALiBi slope of the head of row coordinates rc (1 without ALiBi).
fn sm_slope(rc: vec4<u32>) -> f32 {
    var slope = 1.0;
    if (P[57u] != 0u) {
        let h = rc.z;
        let nh = P[58u];
        if (h < nh) { slope = pow(pf(51u), f32(h + 1u)); } else {
            slope = pow(pf(52u), f32(2u * (h - nh) + 1u));
        }
    }
    return slope;
}

// Element offset of the mask row for row coordinates rc (0 without a mask).
fn sm_mask_base(rc: vec4<u32>) -> u32 {
    if (P[56u] == 0u) { return 0u; }
    return idx(1u, vec4<u32>(0u, rc.y % ne(1u, 1u), rc.z % ne(1u, 2u), rc.w % ne(1u, 3u)));
}

// One row reduced by a single invocation (variant SUBC 1, for short rows:
// no workgroup reductions, so no barriers).
fn serial_row(op: u32, row: u32, n1: u32, n2: u32, len: u32) {
    let rc = vec4<u32>(0u, row % n1, (row / n1) % n2, row / (n1 * n2));
    let rb0 = idx(0u, rc);
    let s00 = P[6u];
    let rb2 = idx(2u, rc);
    let s20 = P[38u];
    if (op == 0u || op == 1u) {
        var s = 0.0;
        for (var j = 0u; j < len; j = j + 1u) { s = s + ld0(rb0 + j * s00); }
        if (op == 1u) { s = s / f32(len); }
        st(rb2, s);
    } else if (op == 2u) {
        let slope = sm_slope(rc);
        let mb = sm_mask_base(rc);
        var m = neg_inf();
        for (var j = 0u; j < len; j = j + 1u) { m = max(m, sm_in(j, rb0, mb, slope)); }
        var t = 0.0;
        for (var j = 0u; j < len; j = j + 1u) { t = t + exp(sm_in(j, rb0, mb, slope) - m); }
        for (var j = 0u; j < len; j = j + 1u) {
            st(rb2 + j * s20, exp(sm_in(j, rb0, mb, slope) - m) / t);
        }
    } else if (op == 3u || op == 4u) {
        var mean = 0.0;
        if (op == 3u) {
            for (var j = 0u; j < len; j = j + 1u) { mean = mean + ld0(rb0 + j * s00); }
            mean = mean / f32(len);
        }
        var q = 0.0;
        for (var j = 0u; j < len; j = j + 1u) {
            let d = ld0(rb0 + j * s00) - mean;
            q = q + d * d;
        }
        let inv = 1.0 / sqrt(q / f32(len) + pf(50u));
        for (var j = 0u; j < len; j = j + 1u) {
            st(rb2 + j * s20, (ld0(rb0 + j * s00) - mean) * inv);
        }
    } else if (op == 5u) {
        var best = neg_inf();
        var bi = 0xffffffffu;
        for (var j = 0u; j < len; j = j + 1u) {
            let v = ld0(rb0 + j * s00);
            if (v > best || bi == 0xffffffffu) {
                best = v;
                bi = j;
            }
        }
        st_raw(idx(2u, vec4<u32>(row, 0u, 0u, 0u)), bi);
    }
}

@compute @workgroup_size(256, 1, 1)
fn main(@builtin(local_invocation_id) lid: vec3<u32>,
        @builtin(workgroup_id) wid: vec3<u32>) {
    // The whole dispatch's grid, also when this is a piece of it.
    let nwg = grid();
    let l = lid.x;
    let op = OPC;
    let n0 = ne(0u, 0u);
    let n1 = ne(0u, 1u);
    let n2 = ne(0u, 2u);
    var rows = n1 * n2 * ne(0u, 3u);
    var len = n0;
    if (op == 6u) {
        rows = 1u;
        len = nel(0u);
    }
    if (SUBC == 1u) {
        let stride = nwg.x * 256u;
        for (var row = wid.x * 256u + l; row < rows; row = row + stride) {
            serial_row(op, row, n1, n2, len);
        }
        return;
    }
    for (var row = wid.x; row < rows; row = row + nwg.x) {
        let rc = vec4<u32>(0u, row % n1, (row / n1) % n2, row / (n1 * n2));
        let rb0 = idx(0u, rc);
        let s00 = P[6u];
        let rb2 = idx(2u, rc);
        let s20 = P[38u];
        if (op == 0u || op == 1u || op == 6u) {
            var s = 0.0;
            for (var j = l; j < len; j = j + 256u) {
                if (op == 6u) { s = s + ld0(idx(0u, coords(0u, j))); } else {
                    s = s + ld0(rb0 + j * s00);
                }
            }
            var t = wg_sum(s, l);
            if (op == 1u) { t = t / f32(len); }
            if (l == 0u) {
                if (op == 6u) { st(idx(2u, vec4<u32>(0u)), t); } else { st(idx(2u, rc), t); }
            }
        } else if (op == 2u) {
            let slope = sm_slope(rc);
            let mb = sm_mask_base(rc);
            var m = neg_inf();
            for (var j = l; j < len; j = j + 256u) {
                m = max(m, sm_in(j, rb0, mb, slope));
            }
            let mx = wg_max(m, l);
            var s = 0.0;
            for (var j = l; j < len; j = j + 256u) {
                s = s + exp(sm_in(j, rb0, mb, slope) - mx);
            }
            let tot = wg_sum(s, l);
            for (var j = l; j < len; j = j + 256u) {
                st(rb2 + j * s20, exp(sm_in(j, rb0, mb, slope) - mx) / tot);
            }
        } else if (op == 3u || op == 4u) {
            var mean = 0.0;
            if (op == 3u) {
                var s = 0.0;
                for (var j = l; j < len; j = j + 256u) {
                    s = s + ld0(rb0 + j * s00);
                }
                mean = wg_sum(s, l) / f32(len);
            }
            var q = 0.0;
            for (var j = l; j < len; j = j + 256u) {
                let d = ld0(rb0 + j * s00) - mean;
                q = q + d * d;
            }
            let inv = 1.0 / sqrt(wg_sum(q, l) / f32(len) + pf(50u));
            for (var j = l; j < len; j = j + 256u) {
                st(rb2 + j * s20, (ld0(rb0 + j * s00) - mean) * inv);
            }
        } else if (op == 5u) {
            var best = neg_inf();
            var bi = 0xffffffffu;
            for (var j = l; j < len; j = j + 256u) {
                let v = ld0(rb0 + j * s00);
                if (v > best || bi == 0xffffffffu) {
                    best = v;
                    bi = j;
                }
            }
            let r = wg_argmax(best, bi, l);
            if (l == 0u) { st_raw(idx(2u, vec4<u32>(row, 0u, 0u, 0u)), r); }
        }
    }
}
