// SPDX-License-Identifier: GPL-2.0
/*
 * hwmgrtest: a tiny out-of-tree module used by hwmgr's tests to exercise the
 * SRPM -> DKMS -> modinfo path with real tools. The SRPM factory renames this
 * file (e.g. to be2net.c) to build a module shaped like a vendor driver.
 */
#include <linux/init.h>
#include <linux/module.h>
#include <linux/moduleparam.h>

#include "version.h"	/* written by the SRPM factory: #define HWMGRTEST_VERSION "x.y" */

#ifndef HWMGRTEST_VERSION
#error "HWMGRTEST_VERSION is not set: pass -DHWMGRTEST_VERSION or provide version.h"
#endif

static unsigned int ring_size = 512;
module_param(ring_size, uint, 0444);
MODULE_PARM_DESC(ring_size, "Size of the pretend receive ring (default 512)");

static int __init hwmgrtest_init(void)
{
	pr_info("%s: version %s loaded, ring_size=%u\n", KBUILD_MODNAME,
		HWMGRTEST_VERSION, ring_size);
	return 0;
}

static void __exit hwmgrtest_exit(void)
{
	pr_info("%s: unloaded\n", KBUILD_MODNAME);
}

module_init(hwmgrtest_init);
module_exit(hwmgrtest_exit);

MODULE_LICENSE("GPL");
MODULE_AUTHOR("hwmgr test suite");
MODULE_DESCRIPTION("hwmgr test module " HWMGRTEST_VERSION);
MODULE_VERSION(HWMGRTEST_VERSION);
