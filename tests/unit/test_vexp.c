/*
 * test_vexp.c - vexp16, the 16-lane e^x of the attention softmax
 * (vec_f32.h), against the C library's expf (ASan/UBSan build).
 *
 * Over [-87.33, 0], the range a softmax feeds it (scores minus their max,
 * down to where e^x leaves the normal floats), every float of a dense sweep
 * is within 2 ulp of expf; lanes are independent (a lane's result does not
 * depend on its neighbours); below -87.33 results stay finite, positive
 * and below 2^-125, so a weight that small never turns into NaN or infinity.
 */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <criterion/criterion.h>

#include "common/vec_f32.h"

static int64_t ulp_distance(float a, float b)
{
	int32_t ia, ib;
	memcpy(&ia, &a, 4);
	memcpy(&ib, &b, 4);
	return ia > ib ? (int64_t)ia - ib : (int64_t)ib - ia; /* both positive floats */
}

Test(vexp, within_2_ulp_of_expf)
{
	int64_t worst = 0;
	float worst_x = 0.0f;
	long n = 0;
	for (float x0 = -87.33f; x0 <= 0.0f; x0 += 0.0016f) {
		vf16 x, y;
		for (int l = 0; l < 16; l++)
			x[l] = fminf(x0 + l * 0.0001f, 0.0f);
		y = vexp16(x);
		for (int l = 0; l < 16; l++, n++) {
			int64_t d = ulp_distance(y[l], expf(x[l]));
			if (d > worst) {
				worst = d;
				worst_x = x[l];
			}
		}
	}
	printf("vexp16: %ld arguments in [-87.33, 0], worst %lld ulp (at %.6f)\n", n, (long long)worst,
	       (double)worst_x);
	cr_assert_gt(n, 800000);
	cr_assert_leq(worst, 2, "vexp16 is %lld ulp from expf at %g", (long long)worst, (double)worst_x);
}

Test(vexp, lanes_are_independent_and_exact_points_hold)
{
	vf16 x = { 0 }, a, b;
	for (int l = 0; l < 16; l++)
		x[l] = -0.37f * (float)l;
	a = vexp16(x);
	for (int l = 0; l < 16; l++) {
		vf16 one = { 0 };
		for (int k = 0; k < 16; k++)
			one[k] = x[l]; /* the same argument in every lane */
		b = vexp16(one);
		cr_assert_eq(memcmp(&a[l], &b[5], 4), 0, "lane %d", l);
	}
	cr_assert_eq(a[0], 1.0f, "e^0 is 1 exactly");
}

Test(vexp, far_below_stays_finite_and_tiny)
{
	float args[] = { -87.34f, -88.0f, -100.0f, -1000.0f, -1e30f, -FLT_MAX };
	for (size_t i = 0; i < sizeof args / sizeof *args; i++) {
		vf16 x = { 0 };
		x[3] = args[i];
		float y = vexp16(x)[3];
		cr_assert(isfinite(y) && y > 0.0f && y < 0x1p-125f, "e^%g gave %g", (double)args[i], (double)y);
	}
}
