//! The quantized types: ggml's codes, names, block sizes and row sizes.

use anyhow::ensure;

/// A quantized ggml type. The discriminants are ggml's type codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(i32)]
#[allow(non_camel_case_types)]
pub enum QType {
    Q4_0 = 2,
    Q4_1 = 3,
    Q5_0 = 6,
    Q5_1 = 7,
    Q8_0 = 8,
    Q8_1 = 9,
    Q2_K = 10,
    Q3_K = 11,
    Q4_K = 12,
    Q5_K = 13,
    Q6_K = 14,
    Q8_K = 15,
    IQ2_XXS = 16,
    IQ2_XS = 17,
    IQ3_XXS = 18,
    IQ1_S = 19,
    IQ4_NL = 20,
    IQ3_S = 21,
    IQ2_S = 22,
    IQ4_XS = 23,
    IQ1_M = 29,
    TQ1_0 = 34,
    TQ2_0 = 35,
    MXFP4 = 39,
    NVFP4 = 40,
    Q1_0 = 41,
}

/// Super-block size of the K-quants, IQ and ternary types.
pub const QK_K: usize = 256;

impl QType {
    pub const ALL: [QType; 26] = {
        use QType::*;
        [
            Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, Q8_K, IQ2_XXS, IQ2_XS,
            IQ3_XXS, IQ1_S, IQ4_NL, IQ3_S, IQ2_S, IQ4_XS, IQ1_M, TQ1_0, TQ2_0, MXFP4, NVFP4, Q1_0,
        ]
    };

    pub fn from_code(code: i64) -> Option<QType> {
        QType::ALL.into_iter().find(|q| q.code() as i64 == code)
    }

    pub fn code(self) -> i32 {
        self as i32
    }

    /// (elements per block, bytes per block), ggml's `blck_size` and `type_size`.
    pub fn block(self) -> (usize, usize) {
        use QType::*;
        match self {
            Q4_0 => (32, 18),
            Q4_1 => (32, 20),
            Q5_0 => (32, 22),
            Q5_1 => (32, 24),
            Q8_0 => (32, 34),
            Q8_1 => (32, 36),
            Q2_K => (QK_K, 84),
            Q3_K => (QK_K, 110),
            Q4_K => (QK_K, 144),
            Q5_K => (QK_K, 176),
            Q6_K => (QK_K, 210),
            Q8_K => (QK_K, 292),
            IQ2_XXS => (QK_K, 66),
            IQ2_XS => (QK_K, 74),
            IQ3_XXS => (QK_K, 98),
            IQ1_S => (QK_K, 50),
            IQ4_NL => (32, 18),
            IQ3_S => (QK_K, 110),
            IQ2_S => (QK_K, 82),
            IQ4_XS => (QK_K, 136),
            IQ1_M => (QK_K, 56),
            TQ1_0 => (QK_K, 54),
            TQ2_0 => (QK_K, 66),
            MXFP4 => (32, 17),
            NVFP4 => (64, 36),
            Q1_0 => (128, 18),
        }
    }

    pub fn block_size(self) -> usize {
        self.block().0
    }

    pub fn type_size(self) -> usize {
        self.block().1
    }

    /// ggml's name ("q4_0", "q4_K", "iq2_xxs", ...).
    pub fn name(self) -> &'static str {
        use QType::*;
        match self {
            Q4_0 => "q4_0",
            Q4_1 => "q4_1",
            Q5_0 => "q5_0",
            Q5_1 => "q5_1",
            Q8_0 => "q8_0",
            Q8_1 => "q8_1",
            Q2_K => "q2_K",
            Q3_K => "q3_K",
            Q4_K => "q4_K",
            Q5_K => "q5_K",
            Q6_K => "q6_K",
            Q8_K => "q8_K",
            IQ2_XXS => "iq2_xxs",
            IQ2_XS => "iq2_xs",
            IQ3_XXS => "iq3_xxs",
            IQ1_S => "iq1_s",
            IQ4_NL => "iq4_nl",
            IQ3_S => "iq3_s",
            IQ2_S => "iq2_s",
            IQ4_XS => "iq4_xs",
            IQ1_M => "iq1_m",
            TQ1_0 => "tq1_0",
            TQ2_0 => "tq2_0",
            MXFP4 => "mxfp4",
            NVFP4 => "nvfp4",
            Q1_0 => "q1_0",
        }
    }

    /// Whether ggml refuses to quantize to this type without an importance matrix.
    pub fn requires_imatrix(self) -> bool {
        matches!(self, QType::IQ2_XXS | QType::IQ2_XS | QType::IQ1_S)
    }

    /// Whether ggml has a reference (`quantize_row_<type>_ref`) quantizer: all
    /// but the types that need an importance matrix and IQ1_M.
    pub fn has_ref(self) -> bool {
        !self.requires_imatrix() && self != QType::IQ1_M
    }

    /// Bytes of a row of `n` values, or an error when `n` is not a whole
    /// number of blocks or the size does not fit in memory addresses.
    pub fn row_size(self, n: usize) -> crate::Result<usize> {
        let (bs, ts) = self.block();
        ensure!(
            n % bs == 0,
            "{} stores values in blocks of {bs}; a row of {n} values is not a whole number of \
             blocks (use a row length that is a multiple of {bs})",
            self.name()
        );
        (n / bs).checked_mul(ts).ok_or_else(|| anyhow::anyhow!("{n} values of {} do not fit in memory", self.name()))
    }
}
