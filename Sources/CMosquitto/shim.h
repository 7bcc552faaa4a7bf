#ifndef LBS_CMOSQUITTO_SHIM_H
#define LBS_CMOSQUITTO_SHIM_H
#include <mosquitto.h>
#include <mqtt_protocol.h>
#endif
