// dst[m, n, i2, i3] = sum_k A(k, m) * B(k, n). Each workgroup of 256
// invocations computes a 64 x 64 tile of the result, each invocation a 4 x 4
// block of it, staging 16-deep slices of A and B in shared memory. A and B are
// addressed with the strides in words 56..59, so one shader serves mul_mat
// (A = a[K, M]) and out_prod (A = a[M, K] read transposed). Batch dims 2 and 3
// of the sources broadcast over the result's.
// Words: 56 A's k stride, 57 A's m stride, 58 B's k stride, 59 B's n stride,
// 60 K, 61 M, 62 N.

const TILE: u32 = 64u;
const DEPTH: u32 = 16u;

var<workgroup> As: array<f32, 1024>;
var<workgroup> Bs: array<f32, 1024>;

@compute @workgroup_size(256, 1, 1)
fn main(@builtin(local_invocation_index) lid: u32,
        @builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>) {
    let sak = P[56u];
    let sam = P[57u];
    let sbk = P[58u];
    let sbn = P[59u];
    let K = P[60u];
    let M = P[61u];
    let N = P[62u];
    let tm = (M + TILE - 1u) / TILE;
    let tn = (N + TILE - 1u) / TILE;
    let d2 = ne(2u, 2u);
    let d3 = ne(2u, 3u);
    let ra2 = d2 / ne(0u, 2u);
    let ra3 = d3 / ne(0u, 3u);
    let rb2 = d2 / ne(1u, 2u);
    let rb3 = d3 / ne(1u, 3u);
    let da = dt(0u);
    let db = dt(1u);
    let tx = lid % 16u;
    let ty = lid / 16u;
    for (var bz = wid.z; bz < d2 * d3; bz = bz + nwg.z) {
        let i2 = bz % d2;
        let i3 = bz / d2;
        let abase = idx(0u, vec4<u32>(0u, 0u, i2 / ra2, i3 / ra3));
        let bbase = idx(1u, vec4<u32>(0u, 0u, i2 / rb2, i3 / rb3));
        for (var ty0 = wid.y; ty0 < tn; ty0 = ty0 + nwg.y) {
            for (var tx0 = wid.x; tx0 < tm; tx0 = tx0 + nwg.x) {
                let m0 = tx0 * TILE;
                let n0 = ty0 * TILE;
                var c0 = vec4<f32>(0.0);
                var c1 = vec4<f32>(0.0);
                var c2 = vec4<f32>(0.0);
                var c3 = vec4<f32>(0.0);
                for (var k0 = 0u; k0 < K; k0 = k0 + DEPTH) {
                    for (var r = 0u; r < 4u; r = r + 1u) {
                        let e = lid + 256u * r;
                        let kr = e % DEPTH;
                        let k = k0 + kr;
                        let j = e / DEPTH;
                        var av = 0.0;
                        var bv = 0.0;
                        if (k < K && m0 + j < M) { av = ld0t(abase + k * sak + (m0 + j) * sam, da); }
                        if (k < K && n0 + j < N) { bv = ld1t(bbase + k * sbk + (n0 + j) * sbn, db); }
                        As[kr * TILE + j] = av;
                        Bs[kr * TILE + j] = bv;
                    }
                    workgroupBarrier();
                    for (var kk = 0u; kk < DEPTH; kk = kk + 1u) {
                        let o = kk * TILE;
                        let a = vec4<f32>(As[o + tx], As[o + tx + 16u], As[o + tx + 32u], As[o + tx + 48u]);
                        c0 = c0 + a * Bs[o + ty];
                        c1 = c1 + a * Bs[o + ty + 16u];
                        c2 = c2 + a * Bs[o + ty + 32u];
                        c3 = c3 + a * Bs[o + ty + 48u];
                    }
                    workgroupBarrier();
                }
                for (var jn = 0u; jn < 4u; jn = jn + 1u) {
                    let n = n0 + ty + 16u * jn;
                    var cv = c0;
                    if (jn == 1u) { cv = c1; }
                    if (jn == 2u) { cv = c2; }
                    if (jn == 3u) { cv = c3; }
                    for (var im = 0u; im < 4u; im = im + 1u) {
                        let m = m0 + tx + 16u * im;
                        if (m < M && n < N) {
                            st(idx(2u, vec4<u32>(m, n, i2, i3)), cv[im]);
                        }
                    }
                }
            }
        }
    }
}
