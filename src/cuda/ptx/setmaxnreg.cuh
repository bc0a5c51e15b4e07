/* setmaxnreg.cuh — moving register budget between warpgroups (sm_90a). Takes effect only
 * in a kernel with a register cap at entry (__launch_bounds__(threads, 1)) whose
 * warpgroup roles are the two branches of one if/else. */
#ifndef VC_PTX_SETMAXNREG_CUH
#define VC_PTX_SETMAXNREG_CUH

/* n: a literal (or a macro for one) multiple of 8 in 24..256; every warp of the warpgroup executes it. A dec
 * frees registers that an inc of another warpgroup then takes. */
#define VC_SETMAXNREG_DEC(n) VC_SETMAXNREG_(dec, n)
#define VC_SETMAXNREG_INC(n) VC_SETMAXNREG_(inc, n)
/* two levels, so that a macro argument is expanded before it is spelled into the asm */
#define VC_SETMAXNREG_(dir, n) VC_SETMAXNREG__(dir, n)
#define VC_SETMAXNREG__(dir, n) asm volatile("setmaxnreg." #dir ".sync.aligned.u32 " #n ";\n" ::: "memory")

#endif
