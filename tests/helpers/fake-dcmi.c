/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A stand-in for the Ascend driver's libdcmi.so, dlopen()ed by tests/unit/test-npu-host.c: two
 * cards (ids 2 and 5) of one chip each, "Ascend" "910B3" with logic id 0 and health 0 (OK) and
 * "Ascend" "310P3" with logic id 1 and health 2 (Alarm). Every query before dcmi_init() fails, as
 * the real one does. Built a second time with FAKE_DCMI_NO_HEALTH, without
 * dcmi_get_device_health(): a library that lacks an entry point. libc only.
 */
#include <string.h>

/* As in the driver's dcmi_interface_api.h. */
struct dcmi_chip_info {
        unsigned char chip_type[32];
        unsigned char chip_name[32];
        unsigned char chip_ver[32];
        unsigned int aicore_cnt;
};

int dcmi_init(void);
int dcmi_get_card_num_list(int *card_num, int *card_list, int list_len);
int dcmi_get_device_num_in_card(int card_id, int *device_num);
int dcmi_get_device_logic_id(int *device_logic_id, int card_id, int device_id);
int dcmi_get_device_health(int card_id, int device_id, unsigned int *health);
int dcmi_get_device_chip_info(int card_id, int device_id, struct dcmi_chip_info *chip_info);

#define DCMI_ERR_NOT_INITIALIZED (-8005)
#define DCMI_ERR_INVALID (-8001)

static const struct {
        int card, logic_id;
        const char *type, *name;
        unsigned health;
} cards[] = {
        { 2, 0, "Ascend", "910B3", 0 },
        { 5, 1, "Ascend", "310P3", 2 },
};

static int initialized;

static int card_index(int card_id, int device_id) {
        if (!initialized)
                return DCMI_ERR_NOT_INITIALIZED;
        for (int i = 0; i < (int) (sizeof(cards) / sizeof(cards[0])); i++)
                if (cards[i].card == card_id && device_id == 0)
                        return i;
        return DCMI_ERR_INVALID;
}

int dcmi_init(void) {
        initialized = 1;
        return 0;
}

int dcmi_get_card_num_list(int *card_num, int *card_list, int list_len) {
        int n = (int) (sizeof(cards) / sizeof(cards[0]));

        if (!initialized)
                return DCMI_ERR_NOT_INITIALIZED;
        if (list_len < n)
                return DCMI_ERR_INVALID;
        for (int i = 0; i < n; i++)
                card_list[i] = cards[i].card;
        *card_num = n;
        return 0;
}

int dcmi_get_device_num_in_card(int card_id, int *device_num) {
        int i = card_index(card_id, 0);

        if (i < 0)
                return i;
        *device_num = 1;
        return 0;
}

int dcmi_get_device_logic_id(int *device_logic_id, int card_id, int device_id) {
        int i = card_index(card_id, device_id);

        if (i < 0)
                return i;
        *device_logic_id = cards[i].logic_id;
        return 0;
}

#ifndef FAKE_DCMI_NO_HEALTH
int dcmi_get_device_health(int card_id, int device_id, unsigned int *health) {
        int i = card_index(card_id, device_id);

        if (i < 0)
                return i;
        *health = cards[i].health;
        return 0;
}
#endif

int dcmi_get_device_chip_info(int card_id, int device_id, struct dcmi_chip_info *chip_info) {
        int i = card_index(card_id, device_id);

        if (i < 0)
                return i;
        memset(chip_info, 0, sizeof(*chip_info));
        /* the real library fills the arrays without room to spare: no terminating NUL assumed */
        memcpy(chip_info->chip_type, cards[i].type, strlen(cards[i].type));
        memcpy(chip_info->chip_name, cards[i].name, strlen(cards[i].name));
        memcpy(chip_info->chip_ver, "V1", 2);
        chip_info->aicore_cnt = 24;
        return 0;
}
