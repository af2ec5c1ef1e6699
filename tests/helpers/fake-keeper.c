/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A stand-in for sandbox-runner-keeper that refuses every job, as a keeper of another version than
 * the daemon does (exit 120, src/keeper/keeper.c), without starting anything. For execute.py. */

int main(void) {
        return 120;
}
