/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* MESSAGE_ID constants of every operator-relevant event; each has an entry in docs/sandbox-runner.catalog. */
#pragma once

#define SR_MESSAGE_STARTED              "156863b03a4e4e98ad9eddd77533f056"
#define SR_MESSAGE_STOPPING             "cb7f284dd8f44554a0526b7d891367c1"
#define SR_MESSAGE_IDLE_EXIT            "c45dae05d57b46bb91a406f6b01d4bc8"
#define SR_MESSAGE_CONFIG_INVALID       "2cbc0da28ce94aa8a3feeda08a3014ff"
#define SR_MESSAGE_AUTH_FAILED          "6055ba522e6c44348f8aa45cc7e4d746"
#define SR_MESSAGE_CREDENTIALS_MISSING  "0d1a6da70661440fa68126b07841329a"
#define SR_MESSAGE_EXECUTION_STARTED    "a9de5f3b7e0b4263a90b8b97d898b83f"
#define SR_MESSAGE_EXECUTION_FINISHED   "4f17f541cb23403c9e79f39ef5a14aea"
#define SR_MESSAGE_PROBE_RESULT         "3ce7701a76f84cf9848974051badafa6"
#define SR_MESSAGE_QUOTA_EXCEEDED       "a767b71c94154029ac9adde2d298af8d"
#define SR_MESSAGE_QUOTA_CHANGED        "cb7cb56e9e1d4683b4fc1a3f40b55d0b"
#define SR_MESSAGE_POLICY_ROTATED       "5eb4d70b0c2047a3b089db951c38dea5"
