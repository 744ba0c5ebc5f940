// Fused attention. OPC 0: flash_attn_ext, one invocation per result element
// ([Dv, H, N, B]): a pass for the largest score, one for the weighted sum of
// v. Sources: q (0), k (1), v (slot 3), mask (slot 4). Words: 49 mask given,
// 50 scale (divided by the soft cap when there is one), 51 soft cap, 52 ALiBi,
// 53/54 ALiBi m0/m1, 55 n_head_log2.
// OPC 1: flash_attn_back, one invocation per element of the packed result
// (gradients of q, k, v from words 56 and 57 on, 58 values in all); d, the
// gradient of the forward result, in slot 4. Words: 49 causal, 50 scale.

// Scaled (and capped) score of query (iq, ih, ib) and key (im, ikh, ikb).
fn score(iq: u32, ih: u32, ib: u32, im: u32, ikh: u32, ikb: u32) -> f32 {
    let d = ne(0u, 0u);
    var s = 0.0;
    for (var x = 0u; x < d; x = x + 1u) {
        s = s + ld0(idx(0u, vec4<u32>(x, iq, ih, ib))) * ld1(idx(1u, vec4<u32>(x, im, ikh, ikb)));
    }
    s = s * pf(50u);
    let cap = pf(51u);
    if (cap != 0.0) {
        let t = exp(-2.0 * abs(s));
        s = cap * sign(s) * (1.0 - t) / (1.0 + t);
    }
    return s;
}

fn slope(ih: u32) -> f32 {
    if (P[52u] == 0u) { return 1.0; }
    let nh = P[55u];
    if (ih < nh) { return pow(pf(53u), f32(ih + 1u)); }
    return pow(pf(54u), f32(2u * (ih - nh) + 1u));
}

fn biased(iq: u32, ih: u32, ib: u32, im: u32, ikh: u32, ikb: u32) -> f32 {
    var s = score(iq, ih, ib, im, ikh, ikb);
    if (P[49u] != 0u) {
        let mv = ld3(idx(4u, vec4<u32>(im, iq, ih % ne(4u, 2u), ib % ne(4u, 3u))));
        s = s + slope(ih) * mv;
    }
    return s;
}

fn flash_ext(i: u32) {
    let c = coords(2u, i);
    let dv = c.x;
    let ih = c.y;
    let iq = c.z;
    let ib = c.w;
    let m = ne(1u, 1u);
    let ikh = ih / (ne(0u, 2u) / ne(1u, 2u));
    let ikb = ib / (ne(0u, 3u) / ne(1u, 3u));
    var mx = neg_inf();
    for (var im = 0u; im < m; im = im + 1u) {
        mx = max(mx, biased(iq, ih, ib, im, ikh, ikb));
    }
    var sum = 0.0;
    var acc = 0.0;
    if (mx > neg_inf()) {
        for (var im = 0u; im < m; im = im + 1u) {
            let s = biased(iq, ih, ib, im, ikh, ikb);
            if (s == neg_inf()) { continue; }
            let p = exp(s - mx);
            sum = sum + p;
            acc = acc + p * ld2(idx(3u, vec4<u32>(dv, im, ikh, ikb)));
        }
    }
    var o = 0.0;
    if (sum > 0.0) { o = acc / sum; }
    st(idx(2u, c), o);
}

// Keys seen by query iq (all, or up to iq + M - N under the causal mask).
fn key_limit(iq: u32) -> u32 {
    let m = ne(1u, 1u);
    if (P[49u] == 0u) { return m; }
    let l = i32(iq) + i32(m) - i32(ne(0u, 1u)) + 1;
    return u32(clamp(l, 0, i32(m)));
}

// dP of query row (iq, ih, ib) and key im: the gradient of the result times v.
fn dprob(iq: u32, ih: u32, ib: u32, im: u32, ikh: u32, ikb: u32) -> f32 {
    let dv = ne(3u, 0u);
    var s = 0.0;
    for (var x = 0u; x < dv; x = x + 1u) {
        s = s + ld3(idx(4u, vec4<u32>(x, ih, iq, ib))) * ld2(idx(3u, vec4<u32>(x, im, ikh, ikb)));
    }
    return s;
}

// Softmax statistics of one query row: (max, sum of exp, sum of P dP).
fn row_stats(iq: u32, ih: u32, ib: u32, ikh: u32, ikb: u32, with_pdp: bool) -> vec3<f32> {
    let lim = key_limit(iq);
    var mx = neg_inf();
    for (var im = 0u; im < lim; im = im + 1u) { mx = max(mx, score(iq, ih, ib, im, ikh, ikb)); }
    var sum = 0.0;
    for (var im = 0u; im < lim; im = im + 1u) { sum = sum + exp(score(iq, ih, ib, im, ikh, ikb) - mx); }
    var pdp = 0.0;
    if (with_pdp) {
        for (var im = 0u; im < lim; im = im + 1u) {
            pdp = pdp + exp(score(iq, ih, ib, im, ikh, ikb) - mx) / sum * dprob(iq, ih, ib, im, ikh, ikb);
        }
    }
    return vec3<f32>(mx, sum, pdp);
}

// Gradient of key (v: false) or value (v: true) element c [x, m, hk, bk]:
// over the queries of every head and batch that use it, dS q[x] or P d[x].
fn kv_grad(c: vec4<u32>, v: bool) -> f32 {
    let n = ne(0u, 1u);
    let rh = ne(0u, 2u) / ne(1u, 2u);
    let rb = ne(0u, 3u) / ne(1u, 3u);
    var g = 0.0;
    for (var ib = c.w * rb; ib < (c.w + 1u) * rb; ib = ib + 1u) {
        for (var ih = c.z * rh; ih < (c.z + 1u) * rh; ih = ih + 1u) {
            for (var iq = 0u; iq < n; iq = iq + 1u) {
                if (c.y >= key_limit(iq)) { continue; }
                let st3 = row_stats(iq, ih, ib, c.z, c.w, !v);
                let p = exp(score(iq, ih, ib, c.y, c.z, c.w) - st3.x) / st3.y;
                if (v) {
                    g = g + p * ld3(idx(4u, vec4<u32>(c.x, ih, iq, ib)));
                } else {
                    g = g + p * (dprob(iq, ih, ib, c.y, c.z, c.w) - st3.z) * ld0(idx(0u, vec4<u32>(c.x, iq, ih, ib)));
                }
            }
        }
    }
    return g;
}

fn flash_back(e: u32) {
    let ok = P[56u];
    let ov = P[57u];
    let nq = nel(0u);
    let nk = nel(1u);
    let nv = nel(3u);
    let rh = ne(0u, 2u) / ne(1u, 2u);
    let rb = ne(0u, 3u) / ne(1u, 3u);
    var g = 0.0;
    if (e < nq) {
        // dq[x, iq, ih, ib] = scale sum_m dS k[x, m]
        let c = coords(0u, e);
        let ikh = c.z / rh;
        let ikb = c.w / rb;
        let st3 = row_stats(c.y, c.z, c.w, ikh, ikb, true);
        let lim = key_limit(c.y);
        for (var im = 0u; im < lim; im = im + 1u) {
            let p = exp(score(c.y, c.z, c.w, im, ikh, ikb) - st3.x) / st3.y;
            let ds = p * (dprob(c.y, c.z, c.w, im, ikh, ikb) - st3.z);
            g = g + ds * ld1(idx(1u, vec4<u32>(c.x, im, ikh, ikb)));
        }
        g = g * pf(50u);
    } else if (e >= ok && e < ok + nk) {
        g = kv_grad(coords(1u, e - ok), false) * pf(50u);
    } else if (e >= ov && e < ov + nv) {
        g = kv_grad(coords(3u, e - ov), true);
    }
    st(idx(2u, vec4<u32>(e, 0u, 0u, 0u)), g);
}

@compute @workgroup_size(256, 1, 1)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    // The whole dispatch's grid, also when this is a piece of it.
    let nwg = grid();
    let n = nel(2u);
    let stride = nwg.x * 256u;
    for (var i = gid.x; i < n; i = i + stride) {
        if (OPC == 0u) { flash_ext(i); } else { flash_back(i); }
    }
}
