// dst[m, n, i2, i3] = sum_k A(k, m) * B(k, n), tiled 16 x 16 through shared
// memory (a small kernel that every driver compiles quickly). A and B are addressed with the strides in words 56..59, so one
// shader serves mul_mat (A = a[K, M]) and out_prod (A = a[M, K] read
// transposed). Batch dims 2 and 3 of the sources broadcast over the result's.
// Words: 56 A's k stride, 57 A's m stride, 58 B's k stride, 59 B's n stride,
// 60 K, 61 M, 62 N. Variant SUBC 1 (see `blocks`) serves CPU-type devices.

var<workgroup> As: array<f32, 256>;
var<workgroup> Bs: array<f32, 256>;

// Variant SUBC 1, for CPU-type devices (lavapipe), where a workgroup
// barrier costs a switch between the invocations: no shared memory; each
// invocation keeps a 4 x 4 block of the result in registers and reads A and
// B directly (the CPU's caches do the tiling).

fn blocks(lid: vec3<u32>, wid: vec3<u32>, nwg: vec3<u32>, abase: u32, bbase: u32, i2: u32, i3: u32, q: Mm) {
    let da = dt(0u);
    let db = dt(1u);
    let bm = (q.m + 3u) / 4u;
    let bn = (q.n + 3u) / 4u;
    for (var yb = wid.y * 16u + lid.y; yb < bn; yb = yb + nwg.y * 16u) {
        for (var xb = wid.x * 16u + lid.x; xb < bm; xb = xb + nwg.x * 16u) {
            let m0 = xb * 4u;
            let n0 = yb * 4u;
            // Rows and columns past the edge read the last valid one; their
            // sums are never stored.
            let a0 = abase + m0 * q.sam;
            let a1 = abase + min(m0 + 1u, q.m - 1u) * q.sam;
            let a2 = abase + min(m0 + 2u, q.m - 1u) * q.sam;
            let a3 = abase + min(m0 + 3u, q.m - 1u) * q.sam;
            let b0 = bbase + n0 * q.sbn;
            let b1 = bbase + min(n0 + 1u, q.n - 1u) * q.sbn;
            let b2 = bbase + min(n0 + 2u, q.n - 1u) * q.sbn;
            let b3 = bbase + min(n0 + 3u, q.n - 1u) * q.sbn;
            var c0 = vec4<f32>(0.0);
            var c1 = vec4<f32>(0.0);
            var c2 = vec4<f32>(0.0);
            var c3 = vec4<f32>(0.0);
            for (var k = 0u; k < q.k; k = k + 1u) {
                let ka = k * q.sak;
                let kb = k * q.sbk;
                let a = vec4<f32>(ld0t(a0 + ka, da), ld0t(a1 + ka, da), ld0t(a2 + ka, da), ld0t(a3 + ka, da));
                c0 = fma(a, vec4<f32>(ld1t(b0 + kb, db)), c0);
                c1 = fma(a, vec4<f32>(ld1t(b1 + kb, db)), c1);
                c2 = fma(a, vec4<f32>(ld1t(b2 + kb, db)), c2);
                c3 = fma(a, vec4<f32>(ld1t(b3 + kb, db)), c3);
            }
            let cs = array<vec4<f32>, 4>(c0, c1, c2, c3);
            for (var j = 0u; j < 4u; j = j + 1u) {
                let n = n0 + j;
                if (n >= q.n) { break; }
                let c = cs[j];
                for (var i = 0u; i < 4u; i = i + 1u) {
                    let m = m0 + i;
                    if (m >= q.m) { break; }
                    st(idx(2u, vec4<u32>(m, n, i2, i3)), c[i]);
                }
            }
        }
    }
}

@compute @workgroup_size(16, 16, 1)
fn main(@builtin(local_invocation_id) lid: vec3<u32>,
        @builtin(workgroup_id) wid: vec3<u32>) {
    // The whole dispatch's grid, also when this is a piece of it.
    let nwg = grid();
    let q = mm_words();
    let sak = q.sak;
    let sam = q.sam;
    let sbk = q.sbk;
    let sbn = q.sbn;
    let K = q.k;
    let M = q.m;
    let N = q.n;
    let da = dt(0u);
    let db = dt(1u);
    let tm = (M + 15u) / 16u;
    let tn = (N + 15u) / 16u;
    let d2 = ne(2u, 2u);
    let d3 = ne(2u, 3u);
    for (var bz = wid.z; bz < d2 * d3; bz = bz + nwg.z) {
        let i2 = bz % d2;
        let i3 = bz / d2;
        let abase = batch_base(0u, i2, i3);
        let bbase = batch_base(1u, i2, i3);
        if (SUBC == 1u) {
            blocks(lid, wid, nwg, abase, bbase, i2, i3, q);
            continue;
        }
        for (var ty = wid.y; ty < tn; ty = ty + nwg.y) {
            for (var tx = wid.x; tx < tm; tx = tx + nwg.x) {
                var acc = 0.0;
                for (var k0 = 0u; k0 < K; k0 = k0 + 16u) {
                    let k = k0 + lid.x;
                    let am = tx * 16u + lid.y;
                    let bn = ty * 16u + lid.y;
                    var av = 0.0;
                    var bv = 0.0;
                    if (k < K && am < M) { av = ld0t(abase + k * sak + am * sam, da); }
                    if (k < K && bn < N) { bv = ld1t(bbase + k * sbk + bn * sbn, db); }
                    As[lid.x * 16u + lid.y] = av;
                    Bs[lid.x * 16u + lid.y] = bv;
                    workgroupBarrier();
                    for (var kk = 0u; kk < 16u; kk = kk + 1u) {
                        acc = acc + As[kk * 16u + lid.x] * Bs[kk * 16u + lid.y];
                    }
                    workgroupBarrier();
                }
                let m = tx * 16u + lid.x;
                let n = ty * 16u + lid.y;
                if (m < M && n < N) {
                    st(idx(2u, vec4<u32>(m, n, i2, i3)), acc);
                }
            }
        }
    }
}
