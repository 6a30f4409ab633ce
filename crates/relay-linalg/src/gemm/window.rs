//! Implicit im2col: a convolution's image window as a GEMM operand, packed straight from the
//! NCHW image (as MLAS's convolution and BLIS's `im2col`-free packing do), so the im2col
//! matrix is neither written nor read.
//!
//! The window of a `C × H × W` image under a `KH × KW` kernel is the `(C·KH·KW) × (OH·OW)`
//! matrix whose element `((c·KH + ky)·KW + kx, y·OW + x)` is the image at
//! `(c, y·SH − PT + ky·DH, x·SW − PL + kx·DW)`, zero outside the image (the padding).

use super::operand::copy_row;
use super::pack::pack_b;
use super::{Element, Matrix, Operand};

/// A convolution's image window (see the module docs); `transposed` makes the pixels the rows.
#[derive(Clone, Copy, Debug)]
pub struct Window<S> {
    /// Element `(0, 0, 0)` of the image, stored row-major `[C, H, W]`.
    pub ptr: *const S,
    /// Channels `C`.
    pub channels: usize,
    /// Image rows `H` and columns `W`.
    pub size: [usize; 2],
    /// Kernel rows `KH` and columns `KW`.
    pub kernel: [usize; 2],
    /// Strides `SH`, `SW`.
    pub stride: [usize; 2],
    /// Dilations `DH`, `DW`.
    pub dilation: [usize; 2],
    /// Padding before the first row `PT` and column `PL` (after the last: wherever the
    /// output size reaches beyond the image).
    pub pad: [usize; 2],
    /// Output rows `OH` and columns `OW`.
    pub out: [usize; 2],
    /// Whether the view is transposed (`(OH·OW) × (C·KH·KW)`).
    pub transposed: bool,
}

impl<S> Window<S> {
    /// The rows of the untransposed window (`C·KH·KW`).
    fn depth(&self) -> usize {
        self.channels * self.kernel[0] * self.kernel[1]
    }

    /// The columns of the untransposed window (`OH·OW`).
    fn pixels(&self) -> usize {
        self.out[0] * self.out[1]
    }

    /// The largest image offset a window element may read plus one (0 when it reads none).
    pub fn span(&self) -> usize {
        self.channels * self.size[0] * self.size[1]
    }
}

/// A GEMM operand: a strided matrix, or a convolution's image window.
#[derive(Clone, Copy, Debug)]
pub enum Source<S> {
    /// A strided matrix view.
    Dense(Matrix<S>),
    /// An image window (implicit im2col).
    Window(Window<S>),
}

// SAFETY: as for `Matrix`: only read by the threads of one GEMM, kept alive by the caller.
unsafe impl<S> Send for Window<S> {}
// SAFETY: as above.
unsafe impl<S> Sync for Window<S> {}

impl<S> Source<S> {
    /// Rows of the operand.
    pub fn rows(&self) -> usize {
        match self {
            Source::Dense(m) => m.rows,
            Source::Window(w) if w.transposed => w.pixels(),
            Source::Window(w) => w.depth(),
        }
    }

    /// Columns of the operand.
    pub fn cols(&self) -> usize {
        match self {
            Source::Dense(m) => m.cols,
            Source::Window(w) if w.transposed => w.depth(),
            Source::Window(w) => w.pixels(),
        }
    }

    /// The transposed operand.
    pub fn transposed(&self) -> Source<S>
    where
        S: Copy,
    {
        match self {
            Source::Dense(m) => Source::Dense(m.transposed()),
            Source::Window(w) => Source::Window(Window {
                transposed: !w.transposed,
                ..*w
            }),
        }
    }
}

/// Packs `depth × cols` of `src` starting at `(p0, c0)` into `nr`-column panels at `dst`, as
/// [`pack_b`] (an `a` operand is packed as its transposed view).
///
/// # Safety
///
/// The block lies inside `src` (an image window's image holds `span()` elements), and `dst`
/// holds `ceil(cols / nr)·nr·depth` elements.
pub(crate) unsafe fn pack_source<T: Element, S: Operand<T>>(
    src: &Source<S>,
    p0: usize,
    depth: usize,
    c0: usize,
    cols: usize,
    nr: usize,
    dst: *mut T,
) {
    // SAFETY: forwarded.
    unsafe {
        match src {
            Source::Dense(m) => pack_b(m, p0, depth, c0, cols, nr, dst),
            Source::Window(w) if !w.transposed => pack_window(w, p0, depth, c0, cols, nr, dst),
            Source::Window(w) => pack_by_element(w, p0, depth, c0, cols, nr, dst),
        }
    }
}

/// [`pack_source`] for a transposed window (pixels as rows) as the `b` operand, which the
/// driver never packs this way round (a window is `b`, or `a` of a transposed product): one
/// element at a time.
///
/// # Safety
///
/// As [`pack_source`].
unsafe fn pack_by_element<T: Element, S: Operand<T>>(
    w: &Window<S>,
    p0: usize,
    depth: usize,
    c0: usize,
    cols: usize,
    nr: usize,
    dst: *mut T,
) {
    for p in 0..depth {
        for j in 0..cols.div_ceil(nr) * nr {
            let v = if j < cols {
                // SAFETY: `(c0 + j, p0 + p)` is inside the untransposed window.
                unsafe { element(w, c0 + j, p0 + p) }
            } else {
                T::ZERO
            };
            // SAFETY: `(p, j)` of panel `j / nr` is inside `dst`.
            unsafe { *dst.add(j / nr * nr * depth + p * nr + j % nr) = v };
        }
    }
}

/// Element `(q, pixel)` of the untransposed window.
///
/// # Safety
///
/// `q < C·KH·KW`, `pixel < OH·OW`, and the image holds `w.span()` elements.
unsafe fn element<T: Element, S: Operand<T>>(w: &Window<S>, q: usize, pixel: usize) -> T {
    let [kh, kw] = w.kernel;
    let (c, ky, kx) = (q / (kh * kw), q / kw % kh, q % kw);
    let (y, x) = (pixel / w.out[1], pixel % w.out[1]);
    let iy = (y * w.stride[0] + ky * w.dilation[0]).checked_sub(w.pad[0]);
    let ix = (x * w.stride[1] + kx * w.dilation[1]).checked_sub(w.pad[1]);
    match (iy, ix) {
        (Some(iy), Some(ix)) if iy < w.size[0] && ix < w.size[1] => {
            // SAFETY: `(c, iy, ix)` is inside the image.
            unsafe { (*w.ptr.add((c * w.size[0] + iy) * w.size[1] + ix)).widen() }
        }
        _ => T::ZERO,
    }
}

/// Packs `depth × cols` of the untransposed window starting at `(p0, c0)` into `nr`-column
/// panels at `dst`, as [`super::pack::pack_b`] packs a matrix: element `(p0 + p, c0 + j)`
/// goes to `dst[(j / nr)·nr·depth + p·nr + j % nr]`, the last panel padded with zeros. (This
/// is also the layout `pack_a` gives the transposed window, pixels as rows.)
///
/// Each window row is gathered into a row buffer (contiguous runs of the image row copied, the
/// padding zeroed), then cut into its panels.
///
/// # Safety
///
/// The image holds `w.span()` elements at `w.ptr`, the block lies inside the window, and
/// `dst` holds `ceil(cols / nr)·nr·depth` elements.
pub(crate) unsafe fn pack_window<T: Element, S: Operand<T>>(
    w: &Window<S>,
    p0: usize,
    depth: usize,
    c0: usize,
    cols: usize,
    nr: usize,
    dst: *mut T,
) {
    let panels = cols.div_ceil(nr);
    let mut row = vec![T::ZERO; panels * nr];
    let [kh, kw] = w.kernel;
    for p in 0..depth {
        let q = p0 + p;
        let (c, ky, kx) = (q / (kh * kw), q / kw % kh, q % kw);
        // SAFETY: `c < C`; `row` holds `cols` elements (forwarded contract).
        unsafe { gather_row(w, c, [ky, kx], c0, &mut row[..cols]) };
        for j in 0..panels {
            // SAFETY: panel `j`'s row `p` is inside `dst`; `row` holds `panels · nr`.
            unsafe {
                copy_panel_row(
                    row.as_ptr().add(j * nr),
                    dst.add(j * nr * depth + p * nr),
                    nr,
                )
            };
        }
    }
}

/// `nr` elements copied (constant lengths for the microkernels' widths).
///
/// # Safety
///
/// `src` and `dst` are valid for `nr` elements and do not overlap.
#[inline(always)]
unsafe fn copy_panel_row<T: Element>(src: *const T, dst: *mut T, nr: usize) {
    // SAFETY: by the contract; each constant length equals `nr`.
    unsafe {
        match nr {
            32 => copy_row::<T, 32>(src, dst),
            16 => copy_row::<T, 16>(src, dst),
            12 => copy_row::<T, 12>(src, dst),
            8 => copy_row::<T, 8>(src, dst),
            _ => std::ptr::copy_nonoverlapping(src, dst, nr),
        }
    }
}

/// `dst[t] = src[t · SW]` widened, for `t < n`, the stride a constant.
///
/// # Safety
///
/// `src` is valid for `(n − 1)·SW + 1` elements and `dst` for `n`.
#[inline(always)]
unsafe fn strided<T: Element, S: Operand<T>, const SW: usize>(
    src: *const S,
    dst: *mut T,
    n: usize,
) {
    for t in 0..n {
        // SAFETY: by the contract.
        unsafe { *dst.add(t) = (*src.add(t * SW)).widen() };
    }
}

/// The window row of channel `c` and kernel tap `(ky, kx)` for pixels `c0..c0 + out.len()`,
/// converted into `out`: per output row, the pixels whose image column lies inside the image
/// read (contiguously at stride 1), the others zero.
///
/// # Safety
///
/// `c < C`, and the image holds `w.span()` elements.
unsafe fn gather_row<T: Element, S: Operand<T>>(
    w: &Window<S>,
    c: usize,
    [ky, kx]: [usize; 2],
    c0: usize,
    out: &mut [T],
) {
    let [h, wd] = w.size;
    let [oh, ow] = w.out;
    let [sh, sw] = w.stride;
    let (dy, dx) = (ky * w.dilation[0], kx * w.dilation[1]);
    // Output columns `x` read image column `x·SW + dx − PL`: inside for `lo <= x < hi`.
    let lo = w.pad[1].saturating_sub(dx).div_ceil(sw).min(ow);
    let hi = if wd + w.pad[1] > dx {
        (wd + w.pad[1] - dx).div_ceil(sw).min(ow)
    } else {
        0
    }
    .max(lo);
    let mut j = 0;
    let (mut y, mut x) = (c0 / ow, c0 % ow);
    while j < out.len() && y < oh {
        let len = (ow - x).min(out.len() - j);
        let seg = &mut out[j..j + len];
        let iy = (y * sh + dy).checked_sub(w.pad[0]).filter(|&iy| iy < h);
        match iy {
            None => seg.fill(T::ZERO),
            Some(iy) => {
                let (a, b) = (lo.clamp(x, x + len), hi.clamp(x, x + len));
                seg[..a - x].fill(T::ZERO);
                seg[b - x..].fill(T::ZERO);
                if a < b {
                    let ix = a * sw + dx - w.pad[1];
                    // SAFETY: `(c, iy, ix + t·SW)` is inside the image for `t < b − a`.
                    unsafe {
                        let src = w.ptr.add((c * h + iy) * wd + ix);
                        let dst = seg[a - x..].as_mut_ptr();
                        match sw {
                            1 => S::convert(src, dst, b - a),
                            // A stride-2 window (a stem, a downsampling block) with the stride
                            // a constant, which the compiler vectorizes as interleaved loads.
                            2 => strided::<T, S, 2>(src, dst, b - a),
                            _ => {
                                for t in 0..b - a {
                                    *dst.add(t) = (*src.add(t * sw)).widen();
                                }
                            }
                        }
                    }
                }
            }
        }
        j += len;
        x = 0;
        y += 1;
    }
}
