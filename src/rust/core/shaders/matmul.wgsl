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
                var acc: array<f32, 16>;
                for (var i = 0u; i < 16u; i = i + 1u) { acc[i] = 0.0; }
                for (var k0 = 0u; k0 < K; k0 = k0 + DEPTH) {
                    for (var r = 0u; r < 4u; r = r + 1u) {
                        let e = lid + 256u * r;
                        let k = k0 + e % DEPTH;
                        let j = e / DEPTH;
                        var av = 0.0;
                        var bv = 0.0;
                        if (k < K && m0 + j < M) { av = ld0(abase + k * sak + (m0 + j) * sam); }
                        if (k < K && n0 + j < N) { bv = ld1(bbase + k * sbk + (n0 + j) * sbn); }
                        As[(e % DEPTH) * TILE + j] = av;
                        Bs[(e % DEPTH) * TILE + j] = bv;
                    }
                    workgroupBarrier();
                    for (var kk = 0u; kk < DEPTH; kk = kk + 1u) {
                        let a0 = As[kk * TILE + tx];
                        let a1 = As[kk * TILE + tx + 16u];
                        let a2 = As[kk * TILE + tx + 32u];
                        let a3 = As[kk * TILE + tx + 48u];
                        for (var jn = 0u; jn < 4u; jn = jn + 1u) {
                            let b = Bs[kk * TILE + ty + 16u * jn];
                            acc[jn * 4u] = acc[jn * 4u] + a0 * b;
                            acc[jn * 4u + 1u] = acc[jn * 4u + 1u] + a1 * b;
                            acc[jn * 4u + 2u] = acc[jn * 4u + 2u] + a2 * b;
                            acc[jn * 4u + 3u] = acc[jn * 4u + 3u] + a3 * b;
                        }
                    }
                    workgroupBarrier();
                }
                for (var jn = 0u; jn < 4u; jn = jn + 1u) {
                    let n = n0 + ty + 16u * jn;
                    for (var im = 0u; im < 4u; im = im + 1u) {
                        let m = m0 + tx + 16u * im;
                        if (m < M && n < N) {
                            st(idx(2u, vec4<u32>(m, n, i2, i3)), acc[jn * 4u + im]);
                        }
                    }
                }
            }
        }
    }
}
